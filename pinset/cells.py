"""What a result says, broken into cells that `pinset report` compares across files (pinset/report/merge.py).

Every result model answers three questions with methods of its own (no `if kind ==` in the report):
`cells()` yields (key, value) pairs (e.g. verify x build x machine x gate -> status), `build_commits()` the
(build, commit) pairs it names, and `pin_states()` the (build, pin, state) triples it claims. This module holds
what those methods share: the value of a cell that says nothing, and how a machine or device is named.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Iterator, Tuple

if TYPE_CHECKING:
    from pinset.result_parts import MachineRecord

Cell = Tuple[tuple, Any]                 # (key, value)
Cells = Iterator[Cell]
BuildCommits = Iterator[Tuple[str, str]]
PinStates = Iterator[Tuple[str, str, str]]


class _SaysNothing:
    """The value of a cell that says nothing (a gate or check not run, a pick row not tried): merges with any."""

    def __repr__(self) -> str:
        return "SAYS_NOTHING"


SAYS_NOTHING: Any = _SaysNothing()


def canonical(data) -> str:
    """One spelling of a JSON value (sorted keys, no spaces): equal data, equal text."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def machine_key(machine: MachineRecord) -> tuple:
    """(host, GPU model, visible GPU UUIDs): two GPUs of one model on one host are two machines (two cells
    of a matrix), and a file from before UUIDs were recorded keeps its old identity."""
    return (machine.hostname, machine.gpu.name if machine.gpu else None, tuple(machine.gpu_uuids or ()))


def device_key(host: dict | None) -> tuple:
    """Where a kld or bench ran, from its optional `host` (host, visible GPU UUIDs); () in older files."""
    return (host["hostname"], tuple(host["gpu_uuids"])) if host else ()


def device_text(key: tuple) -> str:
    """"host" or "host, GPU GPU-1a2b3c4d" for a machine_key or device_key."""
    if not key:
        return ""
    host, uuids = key[0], key[-1]
    return host + (f", GPU {', '.join(u[:12] for u in uuids)}" if uuids else "")
