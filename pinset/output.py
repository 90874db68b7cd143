"""Writing result files and showing tables: shared by every verb."""

from __future__ import annotations

import codecs
import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pinset.redact import redact
from pinset.results import stamped
from pinset.store import atomic_write, write_problem

# A name that is no UTF-8 (a file name's bytes, held by Python as surrogate escapes) in text pinset writes
# (a result file, the console): shown as `\xff`, so the text stays UTF-8 and nothing raises (issue 40).
NAMES_ERRORS = "pinset-names"


def _escape_names(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    part = exc.object[exc.start:exc.end]
    return "".join(f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else f"\\u{ord(c):04x}"
                   for c in part), exc.end


codecs.register_error(NAMES_ERRORS, _escape_names)

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
            vars(Console)["size"].fset(self, new_size)   # rich's own setter (the property above only reads)

        def print(self, *objects, **kwargs):
            if "soft_wrap" not in kwargs and all(isinstance(o, str) for o in objects):
                # a line of text is the terminal's to wrap: rich would fold it at COLUMNS, a path or a command
                # in it cut by a newline that a copy keeps (tables still lay out for the width)
                kwargs["soft_wrap"] = True
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


STDOUT = "-"   # an output file named so is standard output, on every verb (`--json -`, `--markdown -`)
_results: dict[str, Any] = {}   # "stream": where STDOUT's results go once claim_stdout moved the rest away


def is_stdout(path) -> bool:
    """The output path names standard output: the word `-` as given (a Path named "-" is a file: `./-`)."""
    return isinstance(path, str) and path == STDOUT


def claim_stdout(sys_module=sys) -> None:
    """A result goes to standard output (`--json -`): from now on everything else the run prints there (tables,
    progress, plain prints, rich's console) goes to standard error, so standard output holds the result alone
    and reads as JSON. cli.main puts sys.stdout back at the end."""
    _results["stream"] = sys_module.stdout
    sys_module.stdout = sys_module.stderr


def release_stdout() -> None:
    _results.pop("stream", None)


def _write_stdout(text: str) -> None:
    stream = _results.get("stream") or sys.stdout
    stream.write(redact(text))
    stream.flush()


def write_json(path: str | Path, data: dict, started: bool = True) -> None:
    """A JSON file; a result document gets its run's UTC start time (pinset.results.stamped) unless `started` is
    False (a scratch file only this run reads, whose bytes must be the same when its content is)."""
    write_text(path, json.dumps(stamped(data) if started else data, indent=2, sort_keys=False) + "\n")


class _Result(Protocol):
    def to_json(self) -> dict: ...


R = TypeVar("R", bound=_Result)


def write_result(result: R, json_path: str | Path | None, markdown_path: str | Path | None,
                 markdown: Callable[[R], str]) -> None:
    """A verb's --json (the result's JSON) and --markdown (`markdown` of the result) files, each written (and
    the markdown rendered) only when asked for."""
    if json_path:
        write_json(json_path, result.to_json())
    if markdown_path:
        write_text(markdown_path, markdown(result))


def remove_stale(paths) -> None:
    """Remove the result files a run is about to write (None entries skipped): an earlier run's result
    under the same name must not stand in for this run when it is interrupted or fails before writing.
    A link to a file is removed, not the file it names (kept elsewhere on purpose); a device or an open
    stream never (`--json /dev/stdout` is not a result file; as root its unlink removed /dev/stdout)."""
    for path in paths:
        if path is not None and not is_stdout(path) and not _names_a_stream(path) and (Path(path).is_symlink() or Path(path).is_file()):
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
    temporary file). `-` (STDOUT) is standard output."""
    if is_stdout(path):
        _write_stdout(text)
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = redact(text).encode("utf-8", NAMES_ERRORS)  # no token or URL credentials in any result file
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
