"""A pin's patch series, checked when pins.yaml is read: a broken file is bad input, not a conflict.

An empty, truncated or corrupt `.patch` would otherwise reach `git apply --3way` on each build and be
reported as "conflict with upstream" (or, with no diff at all, as applied). `git apply --numstat` on the
file alone runs git's own patch parser without touching any tree, so a parse error is told apart from an
apply failure before any work starts.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from pinset import runner
from pinset.errors import SeriesProblem, ToolchainError

Parsed = frozenset[tuple[str, str]]   # (path, sha256 of its bytes) of patch files known to parse (parse_all)


def parse_all(places: list[Path]) -> Parsed:
    """One `git apply --numstat` over the patch files of every pin's folder or file (`places`, as pins.yaml names
    them) before the pins are read one by one: when it passes, each file's check is known from its bytes and
    a pin set of 13 pins starts one git, not 13. Empty when it fails or there is little to share: then each
    series is checked on its own, as before (the batch only ever says "parses", never names a problem)."""
    files: list[Path] = []
    for place in dict.fromkeys(places):
        try:
            if place.is_dir():
                files += sorted(place / entry.name for entry in os.scandir(place) if entry.name.endswith(".patch"))
            elif place.name.endswith(".patch"):
                files.append(place)
        except OSError:
            continue
    batch: list[tuple[Path, str]] = []
    for path in files:
        if _file_problem(path):
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if not _guesses_strip(data):   # a traditional diff is checked alone (see _series_parses)
            batch.append((path, hashlib.sha256(data).hexdigest()))
    if len(places) < 2 or not batch:
        return frozenset()
    folder = batch[0][0].parent   # git runs where the first pin's check runs (outside any repository)
    parsed = runner.run(["git", "apply", "--numstat", "--", *(str(path) for path, _ in batch)], cwd=folder, timeout=120,
                        env={"GIT_CEILING_DIRECTORIES": str(folder.parent), "GIT_CONFIG_NOSYSTEM": "1",
                             "GIT_CONFIG_GLOBAL": os.devnull})
    if not (parsed.ok and parsed.stdout.strip()):
        return frozenset()
    return frozenset((str(path), digest) for path, digest in batch)


def patch_series(folder: Path, shown: str, parsed: Parsed = frozenset()) -> tuple[Path, ...]:
    """The `*.patch` files of `folder` in name order, each a regular file git can parse as a patch (`parsed`:
    files parse_all found parsing, by path and bytes: not asked again)."""
    try:
        if not folder.is_dir():
            raise SeriesProblem(f"no such folder: {shown}" if not folder.exists() else f"not a folder: {shown}")
        names = sorted(entry.name for entry in os.scandir(folder) if entry.name.endswith(".patch"))
    except OSError as exc:
        raise SeriesProblem(f"cannot read folder {shown}: {(exc.strerror or str(exc)).lower()}") from None
    if not names:
        raise SeriesProblem(f"folder {shown} has no *.patch files")
    series = tuple(folder / name for name in names)
    if _series_parses(folder, series, parsed):
        return series
    for path in series:  # which file, in the words of the check of one file
        problem = _patch_problem(path)
        if problem:
            raise SeriesProblem(f"{shown}/{path.name}: {problem}")
    return series


def single_patch(path: Path, shown: str, parsed: Parsed = frozenset()) -> tuple[Path, ...]:
    """One `.patch` file as a whole pin (`patches: patches/foo.patch`), checked as a series' files are."""
    if not os.path.lexists(path):
        raise SeriesProblem(f"no such file: {shown}")
    if parsed and _known(path, parsed):
        return (path,)
    problem = _patch_problem(path)
    if problem:
        raise SeriesProblem(f"{shown}: {problem}")
    return (path,)


def _known(path: Path, parsed: Parsed) -> bool:
    """parse_all found this file (these bytes at this path) parsing."""
    if _file_problem(path):
        return False
    try:
        return (str(path), hashlib.sha256(path.read_bytes()).hexdigest()) in parsed
    except OSError:
        return False


def _series_parses(folder: Path, series: tuple[Path, ...], known: Parsed = frozenset()) -> bool:
    """Every file of the series is a readable patch git parses, told by one `git apply --numstat` of them
    all (git refuses the whole call when any file has no diff or does not parse): one process for a
    36-patch queue instead of 36 on every run; a file with a traditional diff is checked alone.
    False sends the caller through the files one by one."""
    if any(_file_problem(path) for path in series):
        return False
    if known and all(_known(path, known) for path in series):
        return True
    # A traditional (non-git) diff makes git guess -p and keep the guess for the later files of the call,
    # where it can make a file parse that alone does not: such files are checked alone.
    alone = [path for path in series if _guesses_strip(path.read_bytes())]
    together = [path.name for path in series if path not in alone]
    if together:
        parsed = _numstat(folder, together)
        if not (parsed.ok and parsed.stdout.strip()):
            return False
    return not any(_patch_problem(path) for path in alone)


# The lines of a `diff --git` header before its hunks (git's own list, apply.c): a ---/+++ pair among them
# is the git header's, any other pair may be a traditional diff.
_GIT_HEADER_LINES = (b"--- ", b"old mode ", b"new mode ", b"deleted file mode ", b"new file mode ", b"copy from ",
                     b"copy to ", b"rename old ", b"rename new ", b"rename from ", b"rename to ",
                     b"similarity index ", b"dissimilarity index ", b"index ")


def _guesses_strip(data: bytes) -> bool:
    """Whether git may read a traditional diff in `data` (a `---`/`+++` pair no `diff --git` header holds):
    git then guesses how many leading path components to strip. Errs on the side of True."""
    in_git_header = False
    previous = b""
    for line in data.splitlines():
        if line.startswith(b"diff --git "):
            in_git_header = True
        elif line.startswith(b"+++ ") and previous.startswith(b"--- "):
            if not in_git_header:
                return True
            in_git_header = False
        elif in_git_header and not line.startswith(_GIT_HEADER_LINES):
            in_git_header = False
        previous = line
    return False


def _numstat(folder: Path, names: list[str]) -> runner.Completed:
    # Outside any repository: inside one, `git apply` ignores the paths outside the current folder.
    return runner.run(["git", "apply", "--numstat", "--", *names], cwd=folder, timeout=120,
                      env={"GIT_CEILING_DIRECTORIES": str(folder.parent), "GIT_CONFIG_NOSYSTEM": "1",
                           "GIT_CONFIG_GLOBAL": os.devnull})


def _file_problem(path: Path) -> str | None:
    """What makes `path` no patch file before git reads it (a broken link, unreadable, not a file, empty)."""
    try:
        st = os.stat(path)
        if stat.S_ISREG(st.st_mode):
            with open(path, "rb") as f:
                f.read(1)
    except FileNotFoundError:
        return "broken symbolic link"
    except OSError as exc:
        return f"cannot read: {(exc.strerror or str(exc)).lower()}"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_size == 0:
        return "empty file, not a patch"
    return None


def _patch_problem(path: Path) -> str | None:
    problem = _file_problem(path)
    if problem:
        return problem
    parsed = _numstat(path.parent, [path.name])
    if parsed.returncode == 127:
        raise ToolchainError("git not found on PATH")
    if not parsed.ok or not parsed.stdout.strip():
        error = next((line.removeprefix("error: ") for line in parsed.stderr.splitlines() if line.strip()),
                     parsed.describe())
        if not parsed.stdout.strip() and (parsed.ok or "No valid patches" in error):
            return "no diff in it: not a git format-patch file"
        return f"not a patch git can read: {error}"
    return None
