"""Provable add/add unions (issue 44): the one conflict shape a machine may resolve, and nothing else.

Upstream registers a new architecture at a spot (a `case LLM_ARCH_X:` arm, a name-table entry, an enum
value) and a pin registers another one at the same spot: both sides only added where the merge base had
nothing. The resolution is mechanical — upstream's addition, then the pin's (what a person's repin makes).

Decided from git's own diff3 view of the conflict (`git merge-file --diff3`, long markers), never from
indentation: a conflict hunk is resolvable only when
- its base side is empty (both sides only added) and both sides add something;
- neither side is block scaffolding only (`}`, `break;`, `);`: changes.is_substantive finds nothing);
- the two additions are different constructs: they share no content line (one change made twice, partly),
  except that two runs of `case X:` arms with disjoint labels are two constructs even when their bodies share
  a line (a `return`); a label both sides add is refused;
- its markers nest (a marker line of the file itself inside a hunk is refused).
A file with any other conflict hunk stays a conflict, exactly as without unions. Pure functions over text,
and `Unions.resolve` for the engine's in-memory index (as the ledger's LedgerApply.resolve).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pinset.sim.changes import is_substantive

MARKER_SIZE = 31   # longer than any marker a file holds by accident; a line of exactly these is refused
OURS, BASE, THEIRS = "upstream", "base", "pin"
_OPEN, _BASE, _SEP, _CLOSE = "<" * MARKER_SIZE, "|" * MARKER_SIZE, "=" * MARKER_SIZE, ">" * MARKER_SIZE
_CASE_RE = re.compile(r"\bcase\s+([^:]+?)\s*:(?!:)")


@dataclass(frozen=True)
class UnionHunk:
    """One unioned conflict hunk: the file, the line of the applied file where the pin's addition starts
    (1-based), and both additions as they stand there."""

    file: str
    line: int
    upstream: tuple[str, ...]
    pin: tuple[str, ...]

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "upstream": list(self.upstream), "pin": list(self.pin)}

    @classmethod
    def from_json(cls, d: dict) -> UnionHunk:
        return cls(str(d["file"]), int(d["line"]), tuple(d["upstream"]), tuple(d["pin"]))

    def text(self) -> str:
        """`src/llama-arch.cpp:120: upstream added `case LLM_ARCH_A:`, the pin `case LLM_ARCH_B:``: one line for a
        list (the additions' lines stripped, joined by " / ")."""
        def side(lines: tuple[str, ...]) -> str:
            return " / ".join(line.strip() for line in lines if line.strip())
        return f"{self.file}:{self.line}: upstream added `{side(self.upstream)}`, the pin `{side(self.pin)}`"


@dataclass
class Hunk3:
    ours: list[str]
    base: list[str]
    theirs: list[str]


def split_diff3(marked: str) -> list | None:
    """`git merge-file --diff3 --marker-size=MARKER_SIZE` output as segments (lists of common lines, Hunk3s);
    None where the markers do not nest (a marker line inside a hunk, a hunk left open)."""
    segments: list = [[]]
    state: str | None = None
    hunk = Hunk3([], [], [])
    for line in marked.split("\n"):
        bare = line.rstrip("\r")
        head = bare.split(" ", 1)[0]
        if state is None:
            if head == _OPEN:
                state, hunk = "ours", Hunk3([], [], [])
            elif head in (_BASE, _SEP, _CLOSE):
                return None
            else:
                segments[-1].append(line)
        elif state == "ours" and head == _BASE:
            state = "base"
        elif state == "base" and head == _SEP:
            state = "theirs"
        elif state == "theirs" and head == _CLOSE:
            segments += [hunk, []]
            state = None
        elif head in (_OPEN, _BASE, _SEP, _CLOSE):
            return None
        else:
            getattr(hunk, state).append(line)
    return segments if state is None else None


def _labels(lines: list[str]) -> set[str]:
    """The `case` labels a run of lines adds (its lines that start with `case X:`)."""
    return {m.strip() for line in lines if line.startswith("case") for m in _CASE_RE.findall(line)}


def _before_labels(lines: list[str]) -> list[str]:
    """The lines of a run before its first `case X:` line."""
    for i, line in enumerate(lines):
        if _labels([line]):
            return lines[:i]
    return lines


_SCAFFOLD_WORDS = {"break", "continue", "return", "else", "default", "do", "while", "end", "endif", "fi", "done"}


def scaffolding(line: str) -> bool:
    """Block scaffolding: a line with nothing of its own (`}`, `} break;`, `);`, `return;`, a comment, blank)."""
    return not is_substantive(line) or set(re.findall(r"[A-Za-z_]\w*|\d+", line)) <= _SCAFFOLD_WORDS


def refusal(ours: list[str], base: list[str], theirs: list[str]) -> str | None:
    """Why a diff3 conflict hunk is no provable union (None: it is one)."""
    if base:   # even a blank line: a side changed what was there
        return "the merge base has lines there (an edit, not two additions)"
    up, pin = ([line.strip() for line in side if line.strip()] for side in (ours, theirs))
    if not up or not pin:
        return "one side adds nothing"
    if all(scaffolding(line) for line in up) or all(scaffolding(line) for line in pin):
        return "one side is only block scaffolding"
    shared = {line for line in up if is_substantive(line)} & {line for line in pin if is_substantive(line)}
    up_labels, pin_labels = _labels(up), _labels(pin)
    if up_labels and pin_labels:
        if up_labels & pin_labels:
            return f"both sides add the label case {sorted(up_labels & pin_labels)[0]}:"
        # two runs of arms with disjoint labels: two constructs, whatever body lines their arms share; but a
        # line either side adds before its first label goes to the arm above, and twice there is one change twice
        shared &= set(_before_labels(up)) | set(_before_labels(pin))
        if not shared:
            return None
    if shared:
        return f"both sides add {sorted(shared)[0]!r} (one change made twice)"
    return None


def union(path: str, marked: str) -> tuple[str | None, list[UnionHunk], str | None]:
    """(the unioned text, its hunks, None) when every conflict hunk of `marked` is a provable union; else
    (None, [], why not)."""
    segments = split_diff3(marked)
    if segments is None:
        return None, [], "its conflict markers do not nest"
    out: list[str] = []
    hunks: list[UnionHunk] = []
    for seg in segments:
        if not isinstance(seg, Hunk3):
            out += seg
            continue
        why = refusal(seg.ours, seg.base, seg.theirs)
        if why is not None:
            return None, [], why
        out += seg.ours
        hunks.append(UnionHunk(path, len(out) + 1, tuple(seg.ours), tuple(seg.theirs)))
        out += seg.theirs
    return ("\n".join(out), hunks, None) if hunks else (None, [], "no conflict hunk")


def merge_diff3(ours: bytes, base: bytes, theirs: bytes, tmp: Path) -> str:
    """git's own diff3 view of a 3-way merge (`git merge-file --diff3 -p`, long markers, fixed labels)."""
    from pinset import runner  # noqa: PLC0415 (the parsing above needs no runner)

    tmp.mkdir(parents=True, exist_ok=True)
    files = []
    for name, data in ((OURS, ours), (BASE, base), (THEIRS, theirs)):
        (tmp / name).write_bytes(data)
        files.append(str(tmp / name))
    merged = runner.run(["git", "merge-file", "-p", "--diff3", f"--marker-size={MARKER_SIZE}",
                         "-L", OURS, "-L", BASE, "-L", THEIRS, *files], timeout=120, binary=True)
    if merged.returncode is None or not 0 <= merged.returncode < 127:
        raise RuntimeError(f"git merge-file: {merged.tail(2) or merged.describe()}")
    out: str | bytes = merged.stdout   # bytes: binary=True (Completed names it str)
    return out.decode("utf-8", "surrogateescape") if isinstance(out, bytes) else out   # every byte kept


@dataclass
class Unioned:
    ok: bool
    hunks: list[UnionHunk] = field(default_factory=list)
    why: str | None = None   # not ok: the first refusal, "FILE: why"


class Unions:
    """Resolves a `git apply --cached --3way` that left conflicts in an index, when every conflict hunk of
    every conflicted path is a provable union: the unioned blobs go in at stage 0."""

    def __init__(self, mirror) -> None:
        self.mirror = mirror

    def resolve(self, index: Path, env: dict, work_tree: Path) -> Unioned:
        from pinset.sim.resolve import _read, unmerged_stages  # noqa: PLC0415 (one reader of an index's conflicts)

        stages = unmerged_stages(self.mirror, index, env)
        if not stages:
            return Unioned(False, why="no conflicted file in the index")
        paths = sorted(stages)
        for path in paths:
            if set(stages[path]) != {1, 2, 3}:
                return Unioned(False, why=f"{path}: not a conflict of three versions (added, deleted or moved)")
        blobs = _read(self.mirror, [oid for p in paths for _, oid in stages[p].values()], env)
        hunks: list[UnionHunk] = []
        entries = []
        for n, path in enumerate(paths):
            (_, base), (_, ours), (mode, theirs) = (stages[path][k] for k in (1, 2, 3))
            if any(oid not in blobs for oid in (base, ours, theirs)):
                return Unioned(False, why=f"{path}: a version is not readable")
            if any(b"\0" in blobs[oid][:8000] for oid in (base, ours, theirs)):
                return Unioned(False, why=f"{path}: binary")
            marked = merge_diff3(blobs[ours], blobs[base], blobs[theirs], work_tree / f".union-{n}")
            text, found, why = union(path, marked)
            if text is None:
                return Unioned(False, why=f"{path}: {why}")
            hunks += found
            result = work_tree / f".union-{n}" / "result"
            result.write_bytes(text.encode("utf-8", "surrogateescape"))   # every byte as merge-file gave it
            oid = self.mirror.git_ok("hash-object", "-w", "--no-filters", str(result), env=env).strip()
            entries.append(f"0 {'0' * 40}\t{path}\0{mode} {oid} 0\t{path}\0")
        self.mirror.git_ok("update-index", "-z", "--index-info", index=index, input="".join(entries), env=env)
        return Unioned(True, hunks)
