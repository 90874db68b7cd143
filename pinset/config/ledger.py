"""The resolution ledger: recorded conflict resolutions next to a pin's series (docs/heal.md).

The model is git rerere's: a conflict is the hunk a 3-way merge could not make, with its markers
normalised (the build's lines, then the pin's, no labels); its resolution is the text that replaces
it. A pin's folder holds them in `resolutions/NNNN-<file>.txt`, plain files a reviewer reads:

    # comment lines
    path: src/a.c
    hunk 1: 2 build lines, 1 pin lines, 3 resolved lines
    <<<<<<< build
    ...the build's 2 lines...
    =======
    ...the pin's 1 line...
    >>>>>>> pin
    ...the 3 resolved lines...

The counts make the file unambiguous whatever the lines hold. A conflict is resolved only when every
hunk of the file is found, exactly, among the pin's recorded hunks for that path; otherwise the
resolution is not used (never forced) and the caller says so.

A resolved side is the resolved text: a line of it that is a conflict marker (`<<<<<<<`, `|||||||`,
`=======`, `>>>>>>>` as git writes them) and is not a line of that hunk's build or pin side is a
leftover of the conflict, refused when recorded (record, render) and when read (parse), so that no
verb ever writes markers into a tree.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

RESOLUTIONS_DIR = "resolutions"
OURS, BASE, THEIRS = "ours", "base", "theirs"   # the labels `git merge-file -L` is given
_HUNK_RE = re.compile(r"^hunk (\d+): (\d+) build lines?, (\d+) pin lines?, (\d+) resolved lines?$")
# git's conflict markers (merge, diff3 and zdiff3 styles; a CRLF file keeps its \r), with or without a label
MARKER_RE = re.compile(r"(?:<{7}|\|{7}|>{7})(?:[ \t].*)?\r?|={7}\r?")


class LedgerProblem(Exception):
    """A resolution file that cannot be read (bad input naming the file and line)."""


@dataclass(frozen=True)
class Hunk:
    build: tuple[str, ...]   # the lines of the tree the pin is applied to (ours)
    pin: tuple[str, ...]     # the pin's lines (theirs)


@dataclass
class Resolution:
    id: str                  # the file's stem: 0001-src-a.c
    path: str                # the file of the tree it resolves
    hunks: dict[Hunk, tuple[str, ...]] = field(default_factory=dict)
    source: Path | None = None


def leftover_marker(hunk: Hunk, resolved: tuple[str, ...]) -> int | None:
    """The index of the first resolved line that is a conflict marker the hunk's own sides do not hold (a line
    the build or the pin has, an rst underline say, is text); None when there is none."""
    sides = set(hunk.build) | set(hunk.pin)
    return next((i for i, line in enumerate(resolved) if MARKER_RE.fullmatch(line) and line not in sides), None)


def _marker_problem(line: str) -> str:
    return (f"the resolved lines hold a conflict marker ({line.rstrip(chr(13))!r}): a resolution must be the "
            f"resolved text; resolve the conflict (or delete this resolution)")


def resolution_files(folder: Path | None) -> list[Path]:
    """The ledger's files of a series folder, in name order (none when it has no resolutions/)."""
    if folder is None:
        return []
    ledger = Path(folder) / RESOLUTIONS_DIR
    if not ledger.is_dir():
        return []
    return sorted(p for p in ledger.iterdir() if p.name.endswith(".txt") and p.is_file())


def load(folder: Path | None) -> list[Resolution]:
    """Every resolution of the folder; a file that is not UTF-8 text is a LedgerProblem naming it."""
    out = []
    for path in resolution_files(folder):
        data = path.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data[:exc.start].count(b"\n") + 1
            raise LedgerProblem(f"{path}:{line}: not UTF-8 text (byte {exc.start}: {data[exc.start]:#04x})") from None
        out.append(parse(text, path))
    return out


def parse(text: str, source: Path | None = None) -> Resolution:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    name = source.name if source else "resolution"
    pos = 0
    while pos < len(lines) and lines[pos].startswith("#"):
        pos += 1

    def fail(message: str) -> NoReturn:
        raise LedgerProblem(f"{source or name}:{pos + 1}: {message}")

    if pos >= len(lines) or not lines[pos].startswith("path: "):
        fail("expected `path: FILE`")
    res = Resolution(source.stem if source else name, lines[pos][6:].strip(), source=source)
    pos += 1
    while pos < len(lines):
        m = _HUNK_RE.match(lines[pos])
        if not m:
            fail("expected `hunk N: A build lines, B pin lines, C resolved lines`")
        n_build, n_pin, n_res = int(m[2]), int(m[3]), int(m[4])
        pos += 1

        def take(count: int) -> tuple[str, ...]:
            nonlocal pos
            if pos + count > len(lines):
                fail("file ends inside a hunk")
            out = tuple(lines[pos:pos + count])
            pos += count
            return out

        def marker(expected: str) -> None:
            nonlocal pos
            if pos >= len(lines) or lines[pos] != expected:
                fail(f"expected {expected!r}")
            pos += 1

        marker("<<<<<<< build")
        build = take(n_build)
        marker("=======")
        pin = take(n_pin)
        marker(">>>>>>> pin")
        at = pos
        resolved = take(n_res)
        bad = leftover_marker(Hunk(build, pin), resolved)
        if bad is not None:
            pos = at + bad
            fail(f"hunk {m[1]}: {_marker_problem(resolved[bad])}")
        res.hunks[Hunk(build, pin)] = resolved
    if not res.hunks:
        fail("no hunks")
    return res


def render(res: Resolution, comment: str) -> str:
    out = [f"# {line}" for line in comment.splitlines()] + [f"path: {res.path}"]
    for i, (hunk, resolved) in enumerate(res.hunks.items(), 1):
        bad = leftover_marker(hunk, resolved)
        if bad is not None:
            raise LedgerProblem(f"{res.path}: hunk {i}: {_marker_problem(resolved[bad])}")
        out.append(f"hunk {i}: {len(hunk.build)} build lines, {len(hunk.pin)} pin lines, {len(resolved)} resolved lines")
        out += ["<<<<<<< build", *hunk.build, "=======", *hunk.pin, ">>>>>>> pin", *resolved]
    return "\n".join(out) + "\n"


# --- conflicted text -------------------------------------------------------------------------

Segment = "list[str] | Hunk"


def split_conflicts(marked: str) -> list:
    """`git merge-file -p -L ours -L base -L theirs` output as segments: lists of common lines and Hunks."""
    segments: list = [[]]
    state: str | None = None
    build: list[str] = []
    pin: list[str] = []
    for line in marked.split("\n"):
        if state is None and line == f"<<<<<<< {OURS}":
            state, build, pin = "build", [], []
        elif state == "build" and line == "=======":
            state = "pin"
        elif state == "pin" and line == f">>>>>>> {THEIRS}":
            segments += [Hunk(tuple(build), tuple(pin)), []]
            state = None
        elif state == "build":
            build.append(line)
        elif state == "pin":
            pin.append(line)
        else:
            segments[-1].append(line)
    return segments


def hunks_of(segments: list) -> list[Hunk]:
    return [s for s in segments if isinstance(s, Hunk)]


def resolve(path: str, marked: str, ledger: list[Resolution]) -> tuple[str | None, list[str]]:
    """The text of `path` with every conflict hunk replaced by its recorded resolution, and the ids
    used; (None, ids of the path's resolutions that were looked at) when any hunk is not recorded."""
    candidates = [r for r in ledger if r.path == path]
    segments = split_conflicts(marked)
    used: list[str] = []
    out: list[str] = []
    for seg in segments:
        if not isinstance(seg, Hunk):
            out += seg
            continue
        found = next((r for r in candidates if seg in r.hunks), None)
        if found is None:
            return None, [r.id for r in candidates]
        out += found.hunks[seg]
        if found.id not in used:
            used.append(found.id)
    return "\n".join(out), used


def record(path: str, marked: str, resolved: str) -> dict[Hunk, tuple[str, ...]] | None:
    """The resolution of each hunk of `marked` that turns it into `resolved`; None when replaying them
    does not give `resolved` exactly (the text was also changed outside the conflict hunks). LedgerProblem
    when a hunk's resolution holds a conflict marker (leftover_marker)."""
    segments = split_conflicts(marked)
    hunks = hunks_of(segments)
    if not hunks:
        return None
    flat: list[str] = []
    spans: list[tuple[int, int]] = []     # each hunk's place in `flat` (one placeholder line each)
    for seg in segments:
        if isinstance(seg, Hunk):
            spans.append((len(flat), len(flat) + 1))
            flat.append("\0hunk")
        else:
            flat += seg
    target = resolved.split("\n")
    matcher = difflib.SequenceMatcher(None, flat, target, autojunk=False)
    pairs = [(a + k, b + k) for a, b, n in matcher.get_matching_blocks() for k in range(n)]
    out: dict[Hunk, tuple[str, ...]] = {}
    for hunk, (start, end) in zip(hunks, spans):
        lo = max((b + 1 for a, b in pairs if a < start), default=0)
        hi = min((b for a, b in pairs if a >= end), default=len(target))
        out[hunk] = tuple(target[lo:hi])
    for hunk, lines in out.items():
        bad = leftover_marker(hunk, lines)
        if bad is not None:
            raise LedgerProblem(f"{path}: {_marker_problem(lines[bad])}")
    replay: list[str] = []
    for seg in segments:
        replay += list(out[seg]) if isinstance(seg, Hunk) else seg
    return out if "\n".join(replay) == resolved else None


def slug(path: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", path).strip("-")[:80] or "file"


def next_name(folder: Path, path: str) -> str:
    taken = [int(p.name[:4]) for p in resolution_files(folder) if p.name[:4].isdigit()]
    return f"{max(taken, default=0) + 1:04d}-{slug(path)}.txt"


def merge_marked(ours: bytes, base: bytes, theirs: bytes, tmp: Path) -> str:
    """The 3-way merge of three texts with conflict markers (`git merge-file`, labels fixed)."""
    from pinset import runner  # noqa: PLC0415 (the parsing above needs no runner)

    tmp.mkdir(parents=True, exist_ok=True)
    files = []
    for name, data in ((OURS, ours), (BASE, base), (THEIRS, theirs)):
        (tmp / name).write_bytes(data)
        files.append(str(tmp / name))
    merged = runner.run(["git", "merge-file", "-p", "-L", OURS, "-L", BASE, "-L", THEIRS, *files], timeout=120)
    if merged.returncode is None or not 0 <= merged.returncode < 127:
        raise RuntimeError(f"git merge-file: {merged.tail(2) or merged.describe()}")
    return merged.stdout
