"""One rule for every verb: an output never overwrites, deletes or lands inside one of the command's inputs.

The rule itself, on explicit paths (no argparse here). Which option is an output or an input is declared where
each verb defines it (`pinset/commands/paths.py`: `add_path(parser, "--json", role=OUTPUT_FILE, ...)`), and
`pinset.cli` applies this rule once to the parsed command line, before dispatch; no verb calls it itself.

What is checked, before any work (bad input, exit 2, nothing changed):
- every output can be written (a file output is not a folder, a folder output not a file, a writable place);
- no output is an input (pins.yaml, the pins' patch files and folders, models, program folders, result
  and noise/expect/sim files, the programs in a program folder), compared by real path and by (device,
  inode), so a symbolic or a hard link to an input counts as the input; no output is an input folder, and
  no `*.patch` output is written into a patch folder (it would join the series);
- no two outputs of the same command are the same path.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from pinset.errors import PinsetError
from pinset.store import write_problem


def check_outputs(files: dict[str, str | Path | None], folders: dict[str, str | Path | None] | None = None,
                  inputs=(), input_folders: dict[str, str] | None = None, sealed: frozenset[str] = frozenset()) -> None:
    """Before any work starts: every output the user named can be written, so a long run does not end
    in an error (and nothing is half-written). `files` and `folders` map an option (`--json`) to its
    path or None; `inputs` are files the command reads (a list, or path -> what it is), which no output
    may overwrite, also through a symbolic or hard link. `input_folders` (path -> what it is: a patch folder,
    a program folder) are no output and none of the files directly in them is; in those also in `sealed`
    (a patch folder) no new `*.patch` file may be written either: it would join the series."""
    seen: dict[Path, str] = {}
    seen_ids: dict[tuple[int, int], str] = {}
    what: str | None
    named = inputs if isinstance(inputs, dict) else {str(p): str(p) for p in inputs}
    read = {_absolute(p): _input(p, what) for p, what in named.items()}
    read_ids = {i: _input(p, what) for p, what in named.items() if (i := _file_id(p)) is not None}
    read_dirs = {_absolute(p): what for p, what in (input_folders or {}).items()}
    sealed_dirs = {_absolute(p) for p in sealed}
    for folder, what in (input_folders or {}).items():  # a patch, a program or a library in it, by any name
        for name, i in _entry_ids(folder, programs_only=_absolute(folder) not in sealed_dirs):
            read_ids[i] = read[_absolute(os.path.join(folder, name))] = _input(os.path.join(folder, name), what)
    for kind, outputs in (("file", files), ("folder", folders or {})):
        for flag, value in outputs.items():
            if value is None:
                continue
            path = Path(value)
            try:
                problem = _file_problem(path) if kind == "file" else _folder_problem(path)
            except OSError as exc:
                problem = (exc.strerror or str(exc)).lower()
            if problem:
                raise PinsetError(f"{flag} {path}: {problem} (nothing was run)")
            key, ident = _absolute(path), _file_id(path)
            if other := seen.get(key) or (seen_ids.get(ident) if ident is not None else None):
                raise PinsetError(f"{other} and {flag} both name {path}: "
                                  "give each its own path")
            what = read.get(key) or (read_ids.get(ident) if ident is not None else None)
            if what is not None:
                raise PinsetError(f"{flag} {path}: would overwrite the input file {what}; write the output "
                                  "elsewhere")
            inside = next(((p, w) for p, w in read_dirs.items()  # the folder itself, or a new patch in it
                           if key == p or (p in sealed_dirs and key.parent == p and key.suffix == ".patch")), None)
            if inside is not None:
                raise PinsetError(f"{flag} {path}: is in the input folder {inside[1]}; write the output "
                                  "elsewhere")
            seen[key] = flag
            if ident is not None:
                seen_ids[ident] = flag


def _input(path, what: str) -> str:
    """How an input reads in a message: its path, and what it is when that is not just the path."""
    return str(path) if str(what) == str(path) else f"{path} ({what})"


def _entry_ids(folder: str | Path, programs_only: bool = False):
    """(name, (device, inode)) of the regular files directly in `folder` (one listing, not a tree walk);
    `programs_only`: only programs and shared libraries (a program folder may hold an earlier result too)."""
    try:
        with os.scandir(Path(folder).expanduser()) as entries:
            found = [(e.name, e.stat()) for e in entries if e.is_file()]
    except OSError:
        return []
    return [(name, (st.st_dev, st.st_ino)) for name, st in found
            if not programs_only or st.st_mode & 0o111 or re.search(r"\.(so(\.[0-9.]+)?|dylib|dll)$", name)]


def _file_id(path: str | Path) -> tuple[int, int] | None:
    """(device, inode) of an existing path (links followed): two names of one file, hard links included."""
    try:
        st = os.stat(Path(path).expanduser())
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _absolute(path: str | Path) -> Path:
    return Path(os.path.realpath(Path(path).expanduser()))


def _file_problem(path: Path) -> str | None:
    if path.is_dir():
        return "is a folder; give a file name"
    if path.exists():
        writable = os.access(path, os.W_OK, effective_ids=os.access in os.supports_effective_ids)
        return None if writable else "exists and is not writable"
    return _missing_parent_problem(path)


def _folder_problem(path: Path) -> str | None:
    if path.exists():
        if not path.is_dir():
            return "exists and is not a folder"
        return _cannot_write_in(path)
    return _missing_parent_problem(path)


def _missing_parent_problem(path: Path) -> str | None:
    """`path` does not exist: its nearest existing ancestor must be a folder we can create entries in."""
    ancestor = path.parent
    while not ancestor.exists():
        if ancestor.is_symlink():
            return f"{ancestor} is a broken symbolic link"
        if ancestor == ancestor.parent:
            break
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"{ancestor} is not a folder"
    return _cannot_write_in(ancestor)


def _cannot_write_in(folder: Path) -> str | None:
    problem = write_problem(folder)
    return f"cannot write in {folder} ({problem})" if problem else None

