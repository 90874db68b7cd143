"""Thin entry point: parse arguments, dispatch to a command module, map errors to exit codes.

Only the chosen verb's module is imported, so `pinset sim` does not pay for pandas/scipy/matplotlib (and runs
without them: the light install; kld, bench and model need the `measure` extra and say so, pinset/extras.py).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import re
import sys
import textwrap

from pinset import __version__
from pinset.ci_annotations import annotate_error
from pinset.commands.common import recover_pin_folders
from pinset.commands.paths import check_arguments, stdout_outputs
from pinset.errors import PinsetError, RuntimeFailure
from pinset.extras import MEASURE_VERBS, need_measure
from pinset.output import NAMES_ERRORS
from pinset.redact import wrap_streams
from pinset.results import mark_run_started

# Each verb's one-line summary, written once: `pinset --help` lists it, and it is the verb's help (_Summarised).
COMMANDS = {
    "sim": "apply the pin set onto upstream builds in memory and check contracts",
    "pick": "name the newest upstream build on which the pin set is green",
    "blame": "bisect upstream to the commit that broke (or landed) each pin",
    "forecast": "which open upstream PRs would break, fix, carry or move a pin, before they land",
    "apply": "materialise the pinned tree of one build into a folder",
    "refresh": "rewrite series so they apply exactly on a build (same commits, moved context)",
    "rebase": "resolve a series' conflict on a build in a worktree; record the resolution",
    "bump": "move the pin set to a newer build: one commit on a branch, pushed, kept as one pull request",
    "verify": "build the pinned tree and prove it: CPU gate, CUDA build, tests, feature checks",
    "kld": "KL divergence of base and head device paths against the CPU reference",
    "bench": "interleaved llama-bench of base vs head with statistics",
    "model": "write synthetic GGUF models that run anywhere",
    "matrix": "the CI cells (build x GPU class) as a GitHub Actions matrix",
    "report": "combine results into one verdict and PR comment",
    "history": "the pin set's health night after night: one page from many nights' results",
    "cache": "what the cache holds (info) and removing what can be made again (clean)",
    "import": "write a pins.yaml from a pr-set.json or an Ollama-style checkout",
    "schema": "print the JSON Schema of pins.yaml (for editors)",
    "check": "read pins.yaml and its patches as every verb does, fetching nothing (pre-commit, CI)",
}
MODULES = {"import": "importer"}  # verbs whose module cannot carry their name (a Python keyword)


def _available(name: str) -> bool:
    return importlib.util.find_spec(f"pinset.commands.{MODULES.get(name, name)}") is not None


class Help(argparse.HelpFormatter):
    """Help that fits the terminal (80 columns without one). A one-paragraph description is filled as
    usual; in one of several lines each item (a line, with the more-indented lines under it) is wrapped
    on its own at its indent, so tables of sizes and methods stay tables. Option names such as
    `--op-jobs` are never split at their hyphens."""

    def _split_lines(self, text, width):
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False, break_long_words=False)

    def _fill_text(self, text, width, indent):
        if "\n" not in text.strip():
            return textwrap.fill(" ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent,
                                 break_on_hyphens=False, break_long_words=False)
        items: list[tuple[str, str, str]] = []  # (indent, continuation indent, text)
        for line in text.splitlines():
            lead = line[:len(line) - len(line.lstrip())]
            if items and items[-1][0] and line.strip() and len(lead) > len(items[-1][0]):  # hand-wrapped
                first, _, words = items[-1]
                items[-1] = (first, lead, f"{words} {line.strip()}")
            else:
                items.append((lead, lead + "    ", line.strip()))
        lines = []
        for lead, more, words in items:
            lines += textwrap.wrap(words, width, initial_indent=indent + lead,
                                   subsequent_indent=indent + more, break_on_hyphens=False,
                                   break_long_words=False) or [""]
        return "\n".join(lines)


class OneLineParser(argparse.ArgumentParser):
    """Usage errors are bad input like any other: one line, exit 2 (subcommands inherit the class)."""

    def __init__(self, *args, **kwargs):
        kwargs["formatter_class"] = Help
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _Summarised:
    """The subparsers action as a verb's add_parser sees it: the verb's one-line summary is COMMANDS[name],
    written once here (a help= the verb still passes is replaced)."""

    def __init__(self, sub):
        self._sub = sub

    def add_parser(self, name: str, **kwargs):
        return self._sub.add_parser(name, **{**kwargs, "help": COMMANDS[name]})


def build_parser(chosen: str | None = None) -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="pinset", description="Keep a llama.cpp pin set alive on moving upstream builds.",
        epilog="Exit codes: 0 all green (report: ready); 1 something red, a build or program that failed (its "
               "log named), or not enough evidence; 2 bad input, nothing changed; 130 interrupted. The cache: "
               "$PINSET_CACHE, else $XDG_CACHE_HOME/pinset, else ~/.cache/pinset (--cache per command).")
    parser.add_argument("--version", action="version", version=f"pinset {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, help_text in COMMANDS.items():
        if not _available(name):
            continue
        if name == chosen:
            if name in MEASURE_VERBS:   # one line, exit 2, before a module that needs them is imported
                need_measure()   # said as `pinset NAME: error: needs the measure extra ...`
            module = importlib.import_module(f"pinset.commands.{MODULES.get(name, name)}")
            verb = module.add_parser(_Summarised(sub))
            verb.description = verb.description or f"{help_text[0].upper()}{help_text[1:]}."
            verb.set_defaults(_run=module.run)
        else:
            sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        _utf8_mode()
    argv = list(sys.argv[1:] if argv is None else argv)
    for stream in (sys.stdout, sys.stderr):  # an ASCII or Latin-1 terminal: "\u2705", not a UnicodeEncodeError
        if stream is not None and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors=NAMES_ERRORS)   # (and a name that is no UTF-8: "\xff")
    saved = wrap_streams(sys)  # no token, no URL credentials in anything printed: results, progress, errors
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = saved
        if "pinset.output" in sys.modules:
            sys.modules["pinset.output"].release_stdout()


def _utf8_mode() -> None:
    """Run in Python's UTF-8 mode whatever the user's locale (`LANG=C LC_ALL=C PYTHONUTF8=0`): pinset's inputs
    (pins.yaml, patches, results) are UTF-8 text naming files whose names are UTF-8 bytes (git writes them so),
    and an ASCII file system encoding would hold one name two ways (a path typed on the command line as
    surrogate escapes, the same path read from pins.yaml as text) and fail on every open of the second. So the
    program starts itself again once, in UTF-8 mode (`-X utf8`; the same pinset, the same arguments as bytes,
    the same process id): names that are not UTF-8 are still surrogate escapes there, kept as bytes by every
    writer (output.write_text, the logs, the memo keys). Nothing changes for git's children (runner.py)."""
    if sys.flags.utf8_mode or sys.getfilesystemencoding().lower().replace("-", "") == "utf8" \
            or not sys.executable:
        return
    package_parent = os.fsencode(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = ("import os, sys; sys.path[0] = os.fsdecode(%r); from pinset.cli import main; sys.exit(main())"
            % package_parent)
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    try:
        os.execv(sys.executable, [sys.executable, "-X", "utf8", "-c", code, *sys.argv[1:]])
    except OSError:
        return   # no interpreter to start again: go on as we are


def _main(argv: list[str]) -> int:
    command = "pinset"
    mark_run_started()   # the UTC start time every result file of this run carries (pinset.results.STARTED)
    try:
        chosen = next((a for a in argv if not a.startswith("-")), None)
        command = f"pinset {chosen}" if chosen in COMMANDS else command
        parser = build_parser(chosen if chosen in COMMANDS else None)
        args = parser.parse_args(argv)
        command = f"pinset {args.command}"
        check_arguments(parser, args)  # no output over an input, for every verb: the one check, before dispatch
        recover_pin_folders(args)      # a half swap a killed run left beside a pin's folder: finished first
        if stdout_outputs(parser, args):   # `--json -`: standard output holds the result alone
            from pinset.output import claim_stdout

            claim_stdout()
        return args._run(args)
    except (PinsetError, RuntimeFailure) as exc:
        print(f"{command}: error: {exc}", file=sys.stderr)
        annotate_error(exc, command)   # GitHub Actions only: a pins.yaml problem at its line
        return exc.exit_code
    except KeyboardInterrupt:
        print("pinset: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # stdout's reader went away (`pinset matrix | head -c 10`): nothing to say to it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as exc:  # the system refused mid-run (disk full, read-only file system, quota)
        print(f"{command}: error: {os_error_line(exc)}", file=sys.stderr)
        annotate_error(os_error_line(exc), command)
        return 1


def os_error_line(exc: OSError) -> str:
    """'no space left on device: /path' -- what the system said, and where. A copy of a tree (shutil.Error: a list
    of (source, destination, reason)) says its first failure, and how many more, not the list."""
    import shutil

    failures = exc.args[0] if isinstance(exc, shutil.Error) and exc.args else None
    if isinstance(failures, list) and failures and all(isinstance(f, tuple) and len(f) == 3 for f in failures):
        _, dst, why = failures[0]
        m = re.match(r"^\[Errno \d+\] (.*?)(?:: '.*')?$", str(why), re.S)
        what = (m.group(1) if m else str(why)).splitlines()[0].lower()
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        return f"{what}: {dst}{more}"
    where = ": ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None)
    what = (exc.strerror or str(exc)).lower()
    return f"{what}: {where}" if where else what


if __name__ == "__main__":
    sys.exit(main())
