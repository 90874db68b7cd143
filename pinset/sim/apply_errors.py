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

HUNK_LINES_SHOWN = 4  # lines of the failed hunk kept after its header (enough to find the place)

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
    hunk: list[str] = field(default_factory=list)  # the failed hunk: header + first lines


def explain_apply_failure(output: str, patch_text: str = "") -> ApplyFailure:
    """Files and reason of a failed `git apply` from its stdout+stderr; `patch_text` gives the hunk."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    files: list[str] = []
    failed_hunks: list[str] = []            # "patch failed: F:N at hunk @@ ... @@", in git's order
    failed: set[str] = set()                # files already explained by a failed hunk
    by_kind: dict[str, list[str]] = {}      # what git says of a file -> files, in git's order
    hunk: list[str] = []
    for line in lines:
        m = _PATCH_FAILED_RE.match(line)
        if m:
            path, start = m.group(1), int(m.group(2))
            _add(files, path)
            failed.add(path)
            found = find_hunk(patch_text, path, start)
            hunk = hunk or found
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
        return ApplyFailure(files, "; ".join(parts), hunk)
    telling = [line for line in lines if not any(p.match(line) for p in _NOISE_RES)]
    reason = telling[0] if telling else lines[-1] if lines else "git apply failed"
    return ApplyFailure(files, reason.removeprefix("error: ").removeprefix("fatal: "), hunk)


def find_hunk(patch_text: str, path: str, old_start: int) -> list[str]:
    """The hunk of `path` whose old side starts at `old_start`: header and first lines ([] if none).
    git names a file by its old or its new name, unquoted."""
    try:
        diffs = read_diffs(patch_text)
    except DiffError:
        return []
    for diff in diffs:
        if path in (diff.old, diff.new):
            for hunk in diff.hunks:
                if hunk.old_start == old_start:
                    body = [line for line in hunk.lines if not line.startswith("\\")][:HUNK_LINES_SHOWN]
                    return [hunk.header, *body]
    return []


def _header_only(header: str) -> str:
    """`@@ -1825,7 +1825,9 @@ void f() {` -> `@@ -1825,7 +1825,9 @@` (the function part can be long)."""
    m = _HUNK_HEADER_RE.match(header)
    return m.group(0) if m else header


def _add(files: list[str], path: str) -> None:
    if path not in files:
        files.append(path)
