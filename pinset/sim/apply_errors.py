"""Why `git apply --cached --3way` failed, read from its output: the files and the real reason.

git prints its reasons in the order it tried things, so the first `error:` line is often only
"repository lacks the necessary blob to perform 3-way merge" (no base blob allowed, see the engine)
and the reason comes after "Falling back to direct application...": `patch failed: FILE:LINE` names
the hunk that did not apply. Pure functions over git's output and the patch text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pinset.sim.diffs import DiffError, read_diffs

HUNK_LINES_SHOWN = 400  # lines of the failed hunk kept after its header: the whole hunk (bounded for a generated one)
BUILD_MARGIN = 3        # lines of the build shown before and after the place the hunk wants

_PATCH_FAILED_RE = re.compile(r"^error: patch failed: (.+):(\d+)$")
_PER_FILE_RES = [  # (pattern, what it says of a file), most telling first after `patch failed`
    (re.compile(r"^error: (.+): does not exist in index$"), "missing in this build"),
    (re.compile(r"^error: (.+): already exists in index$"), "already in this build"),
    (re.compile(r"^Applied patch to '(.+)' with conflicts\.$"), "3-way merge conflicts"),
    (re.compile(r"^U (.+)$"), "3-way merge conflicts"),
    (re.compile(r"^error: (.+): patch does not apply$"), "patch does not apply"),
]
FILES_NAMED = 3  # files named per kind of failure in the reason (the JSON's `files` has them all)
# Lines that say what git tried, not why it failed.
_NOISE_RES = [
    re.compile(r"^error: repository lacks the necessary blob"),
    re.compile(r"^Falling back to "),
    re.compile(r"^Checking patch "),
    re.compile(r"^Applying patch "),
    re.compile(r"^Applied patch "),
    re.compile(r"^Performing three-way merge"),
    re.compile(r"^warning: "),
]
_HUNK_HEADER_RE = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")


@dataclass(frozen=True)
class ApplyFailure:
    files: list[str]                  # files git named as failing, in its order, no duplicates
    reason: str                       # one line: the real reason
    hunk: list[str] = field(default_factory=list)  # the failed hunk: header + its lines (whole, up to HUNK_LINES_SHOWN)
    hunk_path: str | None = None      # the file of `hunk`


def explain_apply_failure(output: str, patch_text: str = "") -> ApplyFailure:
    """Files and reason of a failed `git apply` from its stdout+stderr; `patch_text` gives the hunk."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    files: list[str] = []
    failed_hunks: list[str] = []            # "patch failed: F:N at hunk @@ ... @@", in git's order
    failed: set[str] = set()                # files already explained by a failed hunk
    by_kind: dict[str, list[str]] = {}      # what git says of a file -> files, in git's order
    hunk: list[str] = []
    hunk_path = None
    for line in lines:
        m = _PATCH_FAILED_RE.match(line)
        if m:
            path, start = m.group(1), int(m.group(2))
            _add(files, path)
            failed.add(path)
            found = find_hunk(patch_text, path, start)
            if found and not hunk:
                hunk, hunk_path = found, path
            at = f" at hunk {_header_only(found[0])}" if found else ""
            failed_hunks.append(f"patch failed: {path}:{start}{at}")
            continue
        for pattern, kind in _PER_FILE_RES:
            m = pattern.match(line)
            if m:
                _add(files, m.group(1))
                _add(by_kind.setdefault(kind, []), m.group(1))
                break
    parts = list(dict.fromkeys(failed_hunks))
    for _, kind in _PER_FILE_RES:
        named = [f for f in by_kind.get(kind, []) if f not in failed]  # a failed hunk says more
        failed.update(named)
        if named:
            more = f" (+{len(named) - FILES_NAMED} more)" if len(named) > FILES_NAMED else ""
            parts.append(f"{kind}: {', '.join(named[:FILES_NAMED])}{more}")
    if parts:
        return ApplyFailure(files, "; ".join(parts), hunk, hunk_path)
    telling = [line for line in lines if not any(p.match(line) for p in _NOISE_RES)]
    reason = telling[0] if telling else lines[-1] if lines else "git apply failed"
    return ApplyFailure(files, reason.removeprefix("error: ").removeprefix("fatal: "), hunk, hunk_path)


def find_hunk(patch_text: str, path: str, old_start: int) -> list[str]:
    """The hunk of `path` whose old side starts at `old_start`: header and its lines ([] if none)."""
    for hunk in hunks_of(patch_text, path):
        if (header := _HUNK_HEADER_RE.match(hunk[0])) and int(header.group(1)) == old_start:
            return hunk
    return []


def hunks_of(patch_text: str, path: str) -> list[list[str]]:
    """Every hunk (header and lines, each up to HUNK_LINES_SHOWN) of `path` in a patch, in order; git names a
    file by its old or its new name, unquoted (one diff reader: pinset.sim.diffs)."""
    try:
        diffs = read_diffs(patch_text)
    except DiffError:
        return []
    out = []
    for diff in diffs:
        if path in (diff.old, diff.new):
            for hunk in diff.hunks:
                body = [line for line in hunk.lines if not line.startswith("\\")][:HUNK_LINES_SHOWN]
                out.append([hunk.header, *body])
    return out


def failing_hunk(patch_text: str, path: str, build_text: str | None) -> list[str]:
    """For a failure git names by file only (a 3-way merge conflict): the first hunk of `path` whose old side
    (context and removed lines) is not in the build's file as one run of lines; [] when every hunk's is."""
    if build_text is None:
        return (hunks_of(patch_text, path) or [[]])[0]
    have = build_text.splitlines()
    for hunk in hunks_of(patch_text, path):
        old = [line[1:] for line in hunk[1:] if line[:1] in (" ", "-")]
        if not old or not any(have[i:i + len(old)] == old for i in range(len(have) - len(old) + 1)):
            return hunk
    return []


@dataclass(frozen=True)
class BuildPlace:
    """What the build has where a failed hunk wants to change it: `lines` from line `start` (1-based)."""

    path: str
    start: int
    lines: list[str]

    def to_json(self) -> dict:
        return {"path": self.path, "start": self.start, "lines": list(self.lines)}


def build_place(hunk: list[str], path: str, build_text: str | None) -> BuildPlace | None:
    """The build's lines at the place `hunk` wants: its old range (moved to where the hunk's first old line now
    is, nearest to the old start, when upstream moved it) with BUILD_MARGIN lines around; None without the file."""
    m = _HUNK_HEADER_RE.match(hunk[0]) if hunk else None
    if build_text is None or m is None:
        return None
    have = build_text.splitlines()
    start = int(m.group(1))
    old = [line[1:] for line in hunk[1:] if line[:1] in (" ", "-")]
    if old and old[0].strip():
        found = [i + 1 for i, line in enumerate(have) if line == old[0]]
        if found:
            start = min(found, key=lambda n: abs(n - start))
    first = max(1, start - BUILD_MARGIN)
    last = min(len(have), start + max(len(old), 1) - 1 + BUILD_MARGIN)
    return BuildPlace(path, first, have[first - 1:last])


def _header_only(header: str) -> str:
    """`@@ -1825,7 +1825,9 @@ void f() {` -> `@@ -1825,7 +1825,9 @@` (the function part can be long)."""
    m = _HUNK_HEADER_RE.match(header)
    return m.group(0) if m else header


def _add(files: list[str], path: str) -> None:
    if path not in files:
        files.append(path)


def conflict_place(failure_hunk: list[str], hunk_path: str | None, files: list[str], patch_text: str,
                   read_build_file) -> tuple[list[str] | None, BuildPlace | None]:
    """The hunk a conflict is about and what the build has there (sim JSON `hunk`, `build_has`): git's failed
    hunk, else (a 3-way conflict names only files) the first hunk of the first conflicting file whose old
    side the build lacks. `read_build_file(path)`: the build's text of a file, None when absent. Called
    once per conflict, never on a clean apply."""
    path = hunk_path or (files[0] if files else None)
    if path is None:
        return failure_hunk or None, None
    text = read_build_file(path)
    hunk = failure_hunk or failing_hunk(patch_text, path, text)
    return hunk or None, build_place(hunk, path, text)
