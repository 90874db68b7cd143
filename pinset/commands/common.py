"""Arguments shared by several verbs, and the argparse types that check numbers before any work."""

from __future__ import annotations

import argparse
import math
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path

from pinset.commands.paths import INPUT_FILE, UNGUARDED, add_path
from pinset.config.paths import pin_paths
from pinset.config.schema import ARCH_RE, load_pinset
from pinset.errors import PinsetError
from pinset.runner import MAX_TIMEOUT_S
from pinset.store import Store

CACHE_HELP = "cache folder (default: $PINSET_CACHE or $XDG_CACHE_HOME/pinset)"


def add_config_args(parser: argparse.ArgumentParser, builds: bool = True) -> None:
    add_path(parser, "-c", "--config", role=INPUT_FILE, derived=pins_read, default="pins.yaml",
             help="pin set file (default: pins.yaml)")
    if builds:
        parser.add_argument("--builds", help="comma-separated builds or selectors (tags:b*:3, pypi:PKG>=V) "
                                             "to use instead of pins.yaml's")
    add_cache_arg(parser)


def add_cache_arg(parser: argparse._ActionsContainer, help: str = CACHE_HELP) -> None:
    """--cache: pinset's own folder, which the store checks (not an input or output of the verb)."""
    add_path(parser, "--cache", role=UNGUARDED, help=help)


def pin_set_read(config: str | os.PathLike | None) -> dict[str, str]:
    """What a verb reading pins.yaml `config` reads besides it, for the outputs rule: its pins' patch files and
    folders (path -> what it is), as the config reader finds them."""
    if config is None:
        return {}
    return {path: f"patches of {config}" if os.path.isdir(path) else f"a patch of {config}"
            for path in pin_paths(config)}


def pins_read(args: argparse.Namespace) -> dict[str, str]:
    """The `derived` hook of -c/--config: the patches of the pin set it names."""
    return pin_set_read(args.config)


def pins_read_unless(*folders: str) -> Callable[[argparse.Namespace], dict[str, str]]:
    """The `derived` hook of kld's, bench's and model synth's -c: without -c and without any of the program
    `folders` (dests) they read ./pins.yaml, which is then an input too."""
    def read(args: argparse.Namespace) -> dict[str, str]:
        if args.config is None and not any(getattr(args, folder) for folder in folders):
            found = {"pins.yaml": "pins.yaml"} if os.path.isfile("pins.yaml") else {}
            return {**found, **pin_set_read("pins.yaml")}
        return pin_set_read(args.config)
    return read


def open_config(args, require_pins: bool = True):
    pinset = load_pinset(args.config, require_pins=require_pins)   # (a dead run's half swap finished: cli._main)
    warn_damaged_ledgers(pinset)
    return pinset, Store.open(args.cache)


def recover_pin_folders(args: argparse.Namespace) -> None:
    """Finish or undo a pin folder's replacement that a killed run (`refresh --write`, `rebase --continue`,
    `rebase --as-series`, `bump`) left half-way (pinset/swap.py), before any verb reads pins.yaml (its -c, else
    ./pins.yaml where the verb reads that): a pin's folder may be missing until then. Said on stderr. Called
    once for every verb by cli._main, before dispatch."""
    config = getattr(args, "config", None)
    if config is None and os.path.isfile("pins.yaml"):
        config = "pins.yaml"
    if config is not None:
        recover_beside(sorted({Path(p).parent for p in pin_paths(config)}))


def recover_beside(parents) -> None:
    """What dead runs left staged in each of these folders finished or removed (pinset/swap.py), said on
    stderr."""
    from pinset.swap import recover

    for parent in parents:
        for line in recover(parent):
            print(f"pinset: {line}", file=sys.stderr)


def warn_damaged_ledgers(pinset) -> None:
    """A resolution ledger that does not read is only an error where a build needs it (a conflict it would
    resolve); everywhere else it would go unnoticed, so it is said once on stderr when pins.yaml is read."""
    from pinset.config import ledger

    for spec in pinset.pins:
        if spec.patches is None or not Path(spec.patches).is_dir():
            continue
        try:
            ledger.load(spec.patches)
        except (ledger.LedgerProblem, OSError) as exc:
            print(f"pinset: warning: pin {spec.id}: resolution ledger: {exc}; not used: a build where the pin "
                  "applies without it is not affected, one where it conflicts stops with this error", file=sys.stderr)


# Counts go to llama.cpp programs (-j, -t, -r, -c, --chunks, -ngl) as C ints: a larger one is a
# failure deep in a run (or a silent wrap), not an answer.
MAX_COUNT = 2**31 - 1


def count(minimum: int, maximum: int = MAX_COUNT):
    """argparse type: a whole number in [minimum, maximum] (rounds, jobs, chunks, layers...)."""
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        if value > maximum:
            raise argparse.ArgumentTypeError(f"must be <= {maximum}, got {text}")
        return value
    return parse


def seconds(text: str) -> float:
    """argparse type: a duration, finite and > 0 (nan, inf, 0 and negatives would disable or break timeouts)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0, got {text!r}")
    if value > MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_TIMEOUT_S} seconds (11 days), got {text!r}")
    return value


def cuda_architectures(text: str) -> str:
    """argparse type: CMAKE_CUDA_ARCHITECTURES as pins.yaml's `cuda.architectures` takes it."""
    if not ARCH_RE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"malformed {text!r} (e.g. \"90\" or \"86;90\")")
    return text


def only_with(needed: str, present: bool, options: dict[str, bool]) -> None:
    """Options that act only together with another (`--ops` with `--cuda`): given without it they would
    be ignored in silence, and the user would believe in a run that never happened. `options` maps each
    flag to whether it was given."""
    if not present:
        for flag, given in options.items():
            if given:
                raise PinsetError(f"{flag} needs {needed}")


def check_inputs(files: dict[str, str | os.PathLike | None]) -> None:
    """Each named input (option -> path, None when not given) is a regular file we can read: one line
    before any work, not a failure after a build."""
    for flag, value in files.items():
        if value is None:
            continue
        path = Path(value)
        try:
            st = os.stat(path)
            if stat.S_ISDIR(st.st_mode):
                problem = "is a folder, not a file"
            elif not stat.S_ISREG(st.st_mode):
                problem = "not a regular file"
            else:
                with open(path, "rb") as f:
                    f.read(1)
                continue
        except FileNotFoundError:
            problem = "broken symbolic link" if path.is_symlink() else "no such file"
        except OSError as exc:
            problem = f"cannot read ({(exc.strerror or str(exc)).lower()})"
        raise PinsetError(f"{flag} {path}: {problem}")


def pin_named(pinset, pin_id: str, config):
    """The pin of `pinset` with this id, or bad input naming the pins there are (refresh, rebase)."""
    try:
        return pinset.pin(pin_id)
    except KeyError:
        raise PinsetError(f"no pin {pin_id!r} in {config} (pins: {', '.join(p.id for p in pinset.pins)})") from None
