"""The result files of many runs, as `pinset history` reads them.

A source is a folder with one subfolder per run, named by its night (`results/2026-11-04/sim.json`, files in
deeper folders of a run belong to it too), or a git branch whose tree has that layout (the results branch the
nightly workflow commits to; docs/history.md). Every JSON file is read through its kind's model; one that is
not a pinset result, is damaged, or is of a schema this pinset does not read is named and skipped (a line on
stderr, and in the history's `skipped`), never fatal and never counted. Other files (logs, markdown, plots)
are not results and are passed over without a word.

Runs are ordered by the UTC time they started (the earliest `started` of their files), else by the time their
folder's name spells (2026-11-04, 2026-11-04T02:00Z), else by name; runs with no time at all (written before
results said when they started) come first, by name. File times are never read: a copy or checkout changes them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any

from pinset.errors import PinsetError
from pinset.forecast.model import ForecastResult
from pinset.measures.bench_model import BenchResult
from pinset.measures.kld_model import KldResult
from pinset.nightly.model import BlameResult, PickResult
from pinset.report.model import ReportResult
from pinset.results import READS, SCHEMAS, Doc, parse_utc, started_of
from pinset.runner import run
from pinset.sim.model import SimResult
from pinset.verify.model import VerifyResult

MODELS: dict[str, Any] = {"sim": SimResult, "verify": VerifyResult, "kld": KldResult, "bench": BenchResult,
                          "pick": PickResult, "blame": BlameResult, "forecast": ForecastResult, "report": ReportResult}
# the schema versions read: READS (what pinset report reads), and forecast's one
VERSIONS = {**READS, "forecast": (SCHEMAS["forecast"],)}
MAX_FILE = 64 * 1024 * 1024


@dataclass
class Result:
    """One result file of a run, read through its kind's model."""

    where: str          # how messages name it: results/2026-11-04/sim.json, or pinset-results:2026-11-04/sim.json
    name: str           # its path inside the run
    kind: str
    model: Any
    started: datetime | None


@dataclass
class Run:
    """One night: the results of one run's folder."""

    name: str
    results: list[Result] = field(default_factory=list)

    @property
    def started(self) -> datetime | None:
        times = [r.started for r in self.results if r.started is not None]
        return min(times) if times else None

    def of(self, kind: str) -> list[Any]:
        return [r.model for r in self.results if r.kind == kind]


@dataclass(frozen=True)
class Skipped:
    where: str
    why: str

    def line(self) -> str:
        return f"skipped {self.where}: {self.why}"


@dataclass(frozen=True)
class Entry:
    """A file of the source: its run (top folder), its path inside the run, how to name it, its bytes."""

    run: str
    name: str
    where: str
    read: Callable[[], bytes]


def folder_entries(root: Path) -> Iterator[Entry | Skipped]:
    if not root.is_dir():
        raise PinsetError(f"{root}: no such folder of results (one subfolder per night: {root}/2026-11-04/sim.json)")
    for top in sorted(root.iterdir()):
        if top.is_file() and top.suffix == ".json":
            yield Skipped(str(top), "not in a run's folder (one subfolder per night)")
        if not top.is_dir() or top.name.startswith("."):
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                path = Path(dirpath) / name
                if name.endswith(".json"):
                    yield Entry(top.name, path.relative_to(top).as_posix(), str(path), path.read_bytes)


def branch_entries(repo: Path, ref: str) -> Iterator[Entry | Skipped]:
    """The JSON files of `ref`'s tree in the git repository `repo`, read with one `git cat-file --batch`."""
    listed = run(["git", "-C", repo, "ls-tree", "-r", "-z", "--full-tree", f"{ref}^{{tree}}", "--"])
    if not listed.ok:
        why = (listed.stderr.strip().splitlines() or [listed.describe()])[-1]
        raise PinsetError(f"{repo}: cannot read branch {ref!r} ({why})")
    blobs: list[tuple[str, str]] = []
    for item in listed.stdout.split("\0"):
        meta, _, path = item.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == "blob" and path.endswith(".json"):
            blobs.append((path, parts[2]))
    data = _cat_blobs(repo, [oid for _, oid in blobs])
    for path, oid in blobs:
        pure = PurePosixPath(path)
        if len(pure.parts) < 2:
            yield Skipped(f"{ref}:{path}", "not in a run's folder (one subfolder per night)")
            continue
        yield Entry(pure.parts[0], PurePosixPath(*pure.parts[1:]).as_posix(), f"{ref}:{path}",
                    _given(data[oid]))


def _given(blob: bytes) -> Callable[[], bytes]:
    return lambda: blob


def _cat_blobs(repo: Path, oids: list[str]) -> dict[str, bytes]:
    if not oids:
        return {}
    done = run(["git", "-C", repo, "cat-file", "--batch"], input=("\n".join(dict.fromkeys(oids)) + "\n").encode(),
               binary=True)
    if not done.ok:
        raise PinsetError(f"{repo}: git cat-file failed ({done.stderr.strip()[:200]})")
    out: dict[str, bytes] = {}
    raw: bytes = done.stdout  # type: ignore[assignment]   # binary=True: bytes
    at = 0
    while at < len(raw):
        header_end = raw.index(b"\n", at)
        oid, _kind, size = raw[at:header_end].decode().split()
        start = header_end + 1
        out[oid] = raw[start:start + int(size)]
        at = start + int(size) + 1
    return out


def read_result(entry: Entry) -> Result:
    """One file through its kind's model; PinsetError naming the file (and key) when it is not one."""
    try:
        raw = entry.read()
    except OSError as exc:
        raise PinsetError(f"cannot read ({(exc.strerror or str(exc)).lower()})") from None
    if len(raw) > MAX_FILE:
        raise PinsetError(f"larger than {MAX_FILE // 2**20} MiB: not a result")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PinsetError(f"not JSON ({str(exc).splitlines()[0][:120]})") from None
    except RecursionError:
        raise PinsetError("nested too deeply") from None
    if not isinstance(data, dict):
        raise PinsetError("not a pinset result (top level is not an object)")
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in MODELS:
        raise PinsetError(f"not a result history reads (kind {kind!r}; it reads {', '.join(MODELS)})")
    schema = data.get("schema")
    if isinstance(schema, bool) or schema not in VERSIONS[kind]:
        raise PinsetError(f"{kind} schema {schema!r}; this pinset reads {kind} schema "
                          f"{' and '.join(map(str, VERSIONS[kind]))}")
    doc = Doc(data, entry.where, kind)
    try:
        model = MODELS[kind].from_json(doc)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise PinsetError(f"{kind}: does not read ({type(exc).__name__}: {exc})") from None
    return Result(entry.where, entry.name, kind, model, started_of(doc))


def load_runs(entries: Iterator[Entry | Skipped]) -> tuple[list[Run], list[Skipped]]:
    """The runs, ordered (module docstring), and the files skipped."""
    runs: dict[str, Run] = {}
    skipped: list[Skipped] = []
    for entry in entries:
        if isinstance(entry, Skipped):
            skipped.append(entry)
            continue
        try:
            result = read_result(entry)
        except PinsetError as exc:
            skipped.append(Skipped(entry.where, _without_where(str(exc), entry.where)))
            continue
        runs.setdefault(entry.run, Run(entry.run)).results.append(result)
    return sorted(runs.values(), key=run_order), skipped


def _without_where(message: str, where: str) -> str:
    return message[len(where) + 2:] if message.startswith(where + ": ") else message


def name_time(name: str) -> datetime | None:
    """The time a run folder's name spells: an ISO 8601 date (midnight UTC) or time (UTC unless it says)."""
    for size in (20, 19, 16, 10):   # 2026-11-04T02:13:07Z, ...T02:13:07, ...T02:13, 2026-11-04
        head = name[:size]
        when = parse_utc(head) if head.endswith("Z") else None
        if when is None:
            try:
                when = datetime.fromisoformat(head.replace("_", "T")).replace(tzinfo=timezone.utc)
            except ValueError:
                continue
        if len(head) == size:
            return when
    return None


def run_order(r: Run) -> tuple:
    when = r.started or name_time(r.name)
    return (0, "", r.name) if when is None else (1, when.isoformat(), r.name)
