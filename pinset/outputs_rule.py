"""One rule for every verb: an output never overwrites, deletes or lands inside one of the command's inputs.

Each option that names a path says what it is where the verb defines it: `add_path(parser, "--json",
role=OUTPUT_FILE, ...)` tags the argparse action with its role, and where the verb knows more than the value
(the pins' patch files behind `-c`, import's patch queue, verify's logs folder next to `--json`) with a
`derived` hook. After parsing, `pinset.cli` calls `check_arguments` once, before dispatch: it reads the roles
back from the actions of the chosen verb, so no verb checks (or forgets) it itself. An option that names no
path declares nothing; tests/cli/test_outputs_inputs.py fails on one that looks like a path and says nothing.

What is checked, before any work (bad input, exit 2, nothing changed):
- every output can be written (a file output is not a folder, a folder output not a file, a writable place);
- no output is an input (pins.yaml, the pins' patch files and folders, models, program folders, result
  and noise/expect/sim files, the programs in a program folder), compared by real path and by (device,
  inode), so a symbolic or a hard link to an input counts as the input; no output is an input folder, and
  no `*.patch` output is written into a patch folder (it would join the series);
- no two outputs of the same command are the same path.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from pinset.errors import PinsetError
from pinset.store import write_problem

Role = Literal["output-file", "output-folder", "input-file", "input-folder", "unguarded"]
OUTPUT_FILE: Role = "output-file"
OUTPUT_FOLDER: Role = "output-folder"
INPUT_FILE: Role = "input-file"
INPUT_FOLDER: Role = "input-folder"
# names a path this rule does not guard: pinset's own cache (the store checks it), a path on a CI runner
UNGUARDED: Role = "unguarded"
ROLES: tuple[Role, ...] = (OUTPUT_FILE, OUTPUT_FOLDER, INPUT_FILE, INPUT_FOLDER, UNGUARDED)

# What an option brings about besides its own value, from the whole parsed command line: path -> how a message
# names it. On an input option every folder named is a sealed input folder (a patch folder or queue: no new
# `*.patch` in it) and every other path an input file; on an output option, more outputs of its kind.
Derived = Callable[[argparse.Namespace], dict[str, str]]

_ROLE, _DERIVED, _STDOUT = "pinset_role", "pinset_derived", "pinset_stdout"


def add_path(parser: argparse._ActionsContainer, *flags: str, role: Role, derived: Derived | None = None,
             stdout: str | None = None, **kwargs: Any) -> argparse.Action:
    """`parser.add_argument(*flags, **kwargs)` for an option that names a path, tagged with its role where it is
    defined. `stdout`: the value that means standard output (cache's `--json -`), not a path."""
    if role not in ROLES:
        raise ValueError(f"{flags}: role {role!r} is none of {list(ROLES)}")
    action = parser.add_argument(*flags, **kwargs)
    setattr(action, _ROLE, role)
    setattr(action, _DERIVED, derived)
    setattr(action, _STDOUT, stdout)
    return action


def role_of(action: argparse.Action) -> Role | None:
    """The role `add_path` gave the action; None for an option that names no path."""
    return getattr(action, _ROLE, None)


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The rule over one parsed command line: the declared actions of the verb (and sub-verb) `args` chose."""
    declared: dict[str, argparse.Action] = {}
    for action in chosen_actions(parser, args):
        if role_of(action) is not None:
            declared.setdefault(action.dest, action)
    values = vars(args)

    def named(*roles: Role) -> list[argparse.Action]:
        return [declared[d] for d in sorted(declared) if role_of(declared[d]) in roles]

    def given(action: argparse.Action) -> list:
        return [v for v in _as_list(values.get(action.dest)) if v is not None and v != getattr(action, _STDOUT)]

    def derived(action: argparse.Action) -> dict[str, str]:
        hook = getattr(action, _DERIVED)
        return hook(args) if hook is not None else {}

    outputs: dict[Role, dict[str, Any]] = {OUTPUT_FILE: {}, OUTPUT_FOLDER: {}}
    for role, found in outputs.items():
        for action in named(role):
            found.update({_flag(action): value for value in given(action)})
        for action in named(role):
            found.update({name: path for path, name in derived(action).items()})
    if not any(outputs.values()):
        return
    inputs: dict[str, str] = {}      # path -> what it is, for the message
    input_dirs: dict[str, str] = {}
    for action in named(INPUT_FILE):
        inputs.update({str(value): str(value) for value in given(action)})
    for action in named(INPUT_FOLDER):
        input_dirs.update({str(value): f"{_flag(action)} {value}" for value in given(action)})
    sealed = set()
    for action in named(INPUT_FILE, INPUT_FOLDER):
        for path, what in derived(action).items():
            if os.path.isdir(path):
                input_dirs[path] = what
                sealed.add(path)
            else:
                inputs[path] = what
    check_outputs(outputs[OUTPUT_FILE], outputs[OUTPUT_FOLDER], inputs=inputs, input_folders=input_dirs,
                  sealed=frozenset(sealed))


def _flag(action: argparse.Action) -> str:
    """The option as the user types it (`--log-dir`), or a positional's name."""
    if action.option_strings:
        return max(action.option_strings, key=len)
    return str(action.metavar or action.dest)


def _as_list(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def chosen_actions(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[argparse.Action]:
    """The actions of `parser` and of each sub-verb `args` chose (`model synth`: model's, then synth's)."""
    found: list[argparse.Action] = []
    current: argparse.ArgumentParser | None = parser
    while current is not None:
        found += current._actions
        sub = next((a for a in current._actions if isinstance(a, argparse._SubParsersAction)), None)
        current = sub._name_parser_map.get(getattr(args, sub.dest, None) or "") if sub is not None else None
    return found


def verb_parsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(name, parser) of every verb and sub-verb reachable from `parser` (`model synth` included)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action._name_parser_map.items():
                yield name, child
                for sub_name, grandchild in verb_parsers(child):
                    yield f"{name} {sub_name}", grandchild


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

