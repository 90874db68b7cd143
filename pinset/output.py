"""Writing result files and showing tables: shared by every verb."""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from pathlib import Path

from pinset.errors import PinsetError
from pinset.redact import redact
from pinset.store import atomic_write, write_problem

# The width of a console that is no terminal (a CI log, a pipe, a file) when COLUMNS does not say one: wide
# enough that no table is cut ("pypi:llama-cpp-python==0…") and no line wrapped where no one will resize it.
UNLIMITED_WIDTH = 10_000



@functools.lru_cache(maxsize=1)
def _console_class():
    """The console class, made when a console is first used: rich costs 50 ms of imports that a verb writing
    off a terminal (sim in a pipe, CI) never needs."""
    from rich.console import Console
    from rich.errors import MarkupError

    class _Console(Console):
        """Lines mix pinset's markup ("[red]...[/]") with text from outside: paths, file names, git's words.
        Such text that reads as a broken tag ("out[/x]") would end the run in rich's MarkupError after the
        work was done: the line is printed as it is instead.

        Not a terminal and COLUMNS unset, rich would lay tables out for 80 columns and cut cells to "…": the
        width is then UNLIMITED_WIDTH (a table is as wide as its cells; COLUMNS still decides where set). A CI
        log coloured by FORCE_COLOR is still no terminal: what counts is whether the stream is a TTY.
        NO_COLOR (any non-empty value, no-color.org) is honoured by rich itself: no colour, styles kept."""

        @property
        def on_a_tty(self) -> bool:
            """The stream is a real terminal (rich's is_terminal is also true under FORCE_COLOR or TTY_COMPATIBLE)."""
            try:
                return bool(self.file.isatty())
            except (AttributeError, ValueError, OSError):
                return False

        @property
        def size(self):
            dims = super().size
            columns = self._environ.get("COLUMNS") or ""
            if self._width is None and not self.on_a_tty and not columns.isdigit():
                return type(dims)(UNLIMITED_WIDTH, dims.height)
            return dims

        @size.setter
        def size(self, new_size):
            Console.size.fset(self, new_size)

        def print(self, *objects, **kwargs):
            try:
                super().print(*objects, **kwargs)
            except MarkupError:
                super().print(*objects, **{**kwargs, "markup": False})

    return _Console


def __getattr__(name: str):
    """`console`, `err_console` and `_Console`, made (and rich imported) on first use (PEP 562)."""
    if name == "_Console":
        return _console_class()
    if name in ("console", "err_console"):
        made = _console_class()(stderr=name == "err_console", highlight=False)
        globals()[name] = made
        return made
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def stdout_is_terminal() -> bool:
    """`console.is_terminal`, without making the console (and importing rich) where the answer is plainly no:
    stdout is no TTY and neither FORCE_COLOR nor TTY_COMPATIBLE asks rich to treat it as one."""
    try:
        tty = bool(sys.stdout.isatty())
    except (AttributeError, ValueError, OSError):
        tty = False
    if not tty and "FORCE_COLOR" not in os.environ and "TTY_COMPATIBLE" not in os.environ:
        return False
    return bool(__getattr__("console").is_terminal)


def write_json(path: str | Path, data: dict) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def remove_stale(paths) -> None:
    """Remove the result files a run is about to write (None entries skipped): an earlier run's result
    under the same name must not stand in for this run when it is interrupted or fails before writing.
    A link to a file is removed, not the file it names (kept elsewhere on purpose); a device or an open
    stream never (`--json /dev/stdout` is not a result file; as root its unlink removed /dev/stdout)."""
    for path in paths:
        if path is not None and not _names_a_stream(path) and (Path(path).is_symlink() or Path(path).is_file()):
            Path(path).unlink()


def _names_a_stream(path: str | Path) -> bool:
    """`path` is reached through /dev or /proc (/dev/stdout -> /proc/self/fd/1): it names an open file
    (a pipe, the terminal, the shell's redirect), which is written in place, never replaced or removed."""
    name = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on links followed
        if name.startswith(("/dev/", "/proc/")):
            return True
        if not os.path.islink(name):
            return False
        name = os.path.normpath(os.path.join(os.path.dirname(name), os.readlink(name)))
    return False


def write_text(path: str | Path, text: str) -> None:
    """Whole or not at all: a full disk or Ctrl-C half-way leaves the file as it was, never half of the
    new one. A device, FIFO or stream (`--json /dev/stdout`, piped or not) is written in place: there is no
    file to replace (a pipe's realpath is no path at all, and replacing a redirect's file lost what the
    run had printed before); so is a writable file in a folder we may not create in (no room for the
    temporary file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = redact(text).encode("utf-8")  # no token or URL credentials in any result file
    real = Path(os.path.realpath(path))
    try:
        if _names_a_stream(path) or (real.exists() and (not real.is_file() or write_problem(real.parent))):
            with open(path, "wb") as fh:
                fh.write(data)
        else:
            atomic_write(real, data)
    except OSError as exc:
        exc.filename = exc.filename or str(path)  # the one line names what could not be written
        raise


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

