"""An output never overwrites, deletes or lands inside an input: every verb, every output option, every input.

The property test walks the argparse parser pinset.cli builds for each verb (sub-verbs included) and tries
each output option against each of the verb's inputs (pins.yaml, a patch file, a patch folder, models, program
folders, result files), directly, through a symbolic link and through a hard link: exit 2 before dispatch and
every input byte-identical. The verbs' `run` are replaced by a tripwire, so an option the rule misses shows as
"dispatched" instead of starting a build.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pinset import cli
from pinset.commands.paths import INPUT_FILE, INPUT_FOLDER, OUTPUT_FILE, OUTPUT_FOLDER, role_of, verb_parsers
from tests.testing import ROOT


def _verbs():
    """(verb words, its parser) for every verb the CLI offers, each parser built as when it is chosen."""
    out = []
    for name in cli.COMMANDS:
        parser = cli.build_parser(name)
        for words, child in verb_parsers(parser):
            if words.split()[0] == name and not any(isinstance(a, argparse._SubParsersAction) for a in child._actions):
                out.append((words.split(), child))
    return out


VERBS = _verbs()


# What makes an option look like a path: a Path type, a path word in its dest or metavar, or help that speaks of
# a file, folder or path ("write ... here"). An option that takes a free value and looks like one must declare its
# role with add_path (UNGUARDED where it names a path the rule does not guard); one that names no path says nothing.
PATH_NAME = re.compile(r"(^|[_/-])(files?|folders?|dirs?|directory|paths?|trees?|out|output|logs?|json|markdown|md"
                       r"|csv|plot|png|gguf|yaml|model|bin|config|text|worktree|series|source|results?|sim|expect"
                       r"|reanalyse|cache)($|[_/-])", re.I)
PATH_HELP = re.compile(r"\b(files?(?! name)|folders?|director(y|ies)|paths?|here)\b", re.I)


def looks_like_a_path(action: argparse.Action) -> bool:
    """The action takes a free value (not a flag, a choice or a number) that reads as a path."""
    if not isinstance(action, (argparse._StoreAction, argparse._AppendAction, argparse._ExtendAction)):
        return False
    if action.choices is not None or action.type not in (None, str, Path):
        return False
    return action.type is Path or any(PATH_NAME.search(text) for text in (action.dest, str(action.metavar or ""))) \
        or bool(PATH_HELP.search(action.help or ""))


def undeclared(verbs) -> list[str]:
    return sorted({f"{' '.join(w)} {a.dest}" for w, p in verbs for a in p._actions
                   if role_of(a) is None and looks_like_a_path(a)})


def test_every_option_of_every_verb_is_declared():
    """A new option that names a path must say where it is defined whether it is an output or an input, or this
    rule cannot see it."""
    assert not undeclared(VERBS), "declare these with add_path(..., role=...) where they are defined"
    roles = {role_of(a) for _, p in VERBS for a in p._actions}
    assert {OUTPUT_FILE, OUTPUT_FOLDER, INPUT_FILE, INPUT_FOLDER} <= roles
    outputs = {a.dest for _, p in VERBS for a in p._actions if role_of(a) in (OUTPUT_FILE, OUTPUT_FOLDER)}
    assert {"json", "markdown", "csv", "plot", "out", "logs", "log_dir"} <= outputs


@pytest.mark.parametrize("flag,kwargs", [
    ("--report-file", {}), ("--out-dir", {}), ("--summary", {"help": "write the summary here"}),
    ("--weights", {"type": Path}), ("--extra", {"metavar": "FOLDER"}), ("--notes", {"help": "a notes file"}),
])
def test_an_undeclared_path_option_is_found(flag, kwargs):
    """The declaration test fails on a new path option that says nothing (and not on a new count or flag)."""
    parser = cli.OneLineParser(prog="pinset x")
    parser.add_argument(flag, **kwargs)
    parser.add_argument("--rounds", type=int, help="rounds")
    parser.add_argument("--quiet", action="store_true", help="no output files")
    parser.add_argument("--name", help="file name stem")
    assert undeclared([(["x"], parser)]) == [f"x {flag.lstrip('-').replace('-', '_')}"]


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A folder with pins.yaml, a patch folder, a single patch file, a model, program folders and results."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "series").mkdir()
    (tmp_path / "series" / "0001-a.patch").write_text("From 1\n--- a/x\n+++ b/x\n")
    (tmp_path / "one.patch").write_text("From 2\n--- a/y\n+++ b/y\n")
    (tmp_path / "pins.yaml").write_text("builds: [b1]\npins:\n  - {id: a, patches: series}\n"
                                        "  - {id: b, patches: one.patch}\n")
    for name in ("model.gguf", "vs.gguf", "noise.json", "text.txt", "expect.json", "reanalyse.json", "sim.json",
                 "r1.json", "r2.json", "source.json", "vocab.gguf"):
        (tmp_path / name).write_bytes(b"GGUF input " + name.encode())
    for name in ("base", "head", "bin", "tree"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "llama-bench").write_text("#!/bin/sh\n")
        (tmp_path / name / "llama-bench").chmod(0o755)
    calls = []
    for name in cli.COMMANDS:
        module = importlib.import_module(f"pinset.commands.{cli.MODULES.get(name, name)}")
        monkeypatch.setattr(module, "run", lambda args, _n=name: calls.append(_n) or 0)
    monkeypatch.setenv("PINSET_CACHE", str(tmp_path / "cache"))
    return tmp_path, calls


INPUT_VALUES = {"config": "pins.yaml", "model": "model.gguf", "vs_model": "vs.gguf", "noise_from": "noise.json",
                "text": "text.txt", "expect": "expect.json", "reanalyse": "reanalyse.json", "sim": "sim.json",
                "results": "r1.json", "base_bin": "base", "head_bin": "head", "bin": "bin", "llama_tree": "tree",
                "source": "source.json", "cache": "tree", "vocab": "vocab.gguf", "runs": "tree",
                "onto": "pins.yaml"}   # import --onto: the pins.yaml a feature-checks.json goes onto


def _snapshot(root: Path) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*")):
        if "cache" in path.relative_to(root).parts:
            continue
        out[str(path.relative_to(root))] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _argv(words, parser, given: dict[str, str]) -> list[str]:
    """The verb's command line with `given` (dest -> value) and a harmless value for each required option."""
    argv = list(words)
    given = dict(given)
    for group in parser._mutually_exclusive_groups:   # rebase: one of --onto/--continue/--abort/--as-series
        if group.required and not any(a.dest in given for a in group._group_actions):
            first = next(a for a in group._group_actions if a.nargs is None)
            given[first.dest] = "x"
    for action in parser._actions:
        value = given.get(action.dest)
        if value is None and not action.option_strings and action.nargs in (None, "+") and action.dest != "help":
            value = "x"              # a required positional that names no path (a pin id), or is not the one tried
        if value is None and action.required and action.option_strings:
            value = action.choices and next(iter(action.choices)) or (
                "req-out" if role_of(action) == OUTPUT_FOLDER else "x")
        if value is None:
            continue
        if action.option_strings:
            argv += [action.option_strings[-1], value]
        else:
            argv += [value]
    return argv


# verbs whose outputs have no input to protect (`schema` reads nothing; the cache verbs' --cache is an input folder)
NO_INPUTS = {"schema"}


def _targets(dests) -> list[tuple[str, str, str, str]]:
    """(input dest, its value, the output's path, how it is reached) for one verb's inputs."""
    targets = []
    for dest in sorted(d for d, a in dests.items() if role_of(a) in (INPUT_FILE, INPUT_FOLDER)):
        assert dest in INPUT_VALUES, f"{dest}: a new input; give it a file or folder in INPUT_VALUES and world"
        value = INPUT_VALUES[dest]
        targets.append((dest, value, value))                       # the input itself
        if role_of(dests[dest]) == INPUT_FOLDER:
            targets.append((dest, value, f"{value}/llama-bench"))  # a file in it
    if "config" in dests:
        for patch in ("series", "series/0001-a.patch", "series/new.patch", "one.patch"):
            targets.append(("config", "pins.yaml", patch))
    out = []
    for dest, value, target in targets:
        new = target.endswith("/new.patch")
        folder = target == "series" or (role_of(dests[dest]) == INPUT_FOLDER and target == value)
        for via in ("path", "symlink", "hardlink"):
            if via == "path" or not new and not (via == "hardlink" and folder):
                out.append((dest, value, target, via))
    return out


def _cases():
    for words, parser in VERBS:
        dests = {a.dest for a in parser._actions if role_of(a) in (OUTPUT_FILE, OUTPUT_FOLDER)}
        for out in sorted(dests):
            yield pytest.param(words, parser, out, id=f"{'-'.join(words)}:{out}")


@pytest.mark.parametrize("words,parser,out", list(_cases()))
def test_output_over_an_input_is_bad_input(world, capsys, words, parser, out):
    """Each output option of the verb against each input: directly, via a symbolic link, via a hard link."""
    root, calls = world
    targets = _targets({a.dest: a for a in parser._actions})
    if " ".join(words) in NO_INPUTS:
        assert not targets, f"{words}: it reads inputs now; take it off NO_INPUTS"
        return
    assert targets, "a verb with an output and no input to protect: declare its inputs"
    for dest, value, target, via in targets:
        alias = root / "alias"
        if via != "path":
            (os.symlink if via == "symlink" else os.link)(root / target, alias)
            target = "alias"
        before = _snapshot(root)
        given = {dest: value, out: target}
        code = cli.main(_argv(words, parser, given))
        err = capsys.readouterr().err
        case = f"{out} {target} ({via}) against {dest} {value}"
        assert calls == [], f"{case}: dispatched {calls}: {err}"
        assert code == 2, f"{case}: {err}"
        assert err.startswith(f"pinset {words[0]}: error: ") and err.count("\n") == 1, f"{case}: {err}"
        assert _snapshot(root) == before, case
        if via != "path":
            alias.unlink()


def _output_files(parser) -> list[str]:
    return sorted(a.dest for a in parser._actions if role_of(a) == OUTPUT_FILE)


@pytest.mark.parametrize("words,parser", [pytest.param(w, p, id="-".join(w)) for w, p in VERBS
                                          if len(_output_files(p)) >= 2])
def test_two_outputs_on_one_path_are_bad_input(world, capsys, words, parser):
    root, calls = world
    files = _output_files(parser)
    (root / "real.out").write_text("old")
    os.link(root / "real.out", root / "hard.out")
    for second in ("real.out", "hard.out"):
        code = cli.main(_argv(words, parser, {files[0]: "real.out", files[1]: second}))
        err = capsys.readouterr().err
        assert (code, calls) == (2, []), err
        assert "both name" in err
    assert (root / "real.out").read_text() == "old"


def test_a_clean_command_line_is_dispatched(world, capsys):
    """The rule refuses only what it should: distinct outputs elsewhere reach the verb."""
    _root, calls = world
    assert cli.main(["sim", "--json", "out/sim.json", "--markdown", "out/sim.md"]) == 0
    assert cli.main(["bench", "-m", "model.gguf", "--base-bin", "base", "--head-bin", "head", "--csv", "b.csv",
                     "--json", "b.json", "--log-dir", "logs"]) == 0
    # a new file next to the programs is no harm (`--head-bin .`); only the programs are protected
    assert cli.main(["bench", "-m", "model.gguf", "--base-bin", "base", "--head-bin", "head", "--json", "head/b.json",
                     "--log-dir", "base/logs"]) == 0
    assert cli.main(["sim", "--json", "series/sim.json"]) == 0  # not a patch: the series stays as it is
    assert calls == ["sim", "bench", "bench", "sim"]


def _pinset(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT), PINSET_CACHE=str(Path(cwd) / "cache"))
    return subprocess.run([sys.executable, "-m", "pinset", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_matrix_json_over_pins_yaml_end_to_end(tmp_path):
    """The issue's first example, through the real program: the pin set is kept, exit 2."""
    (tmp_path / "pins.yaml").write_text("builds: [b1]\ngpus:\n  h200: {runs-on: [h200], architectures: '90'}\n"
                                        "pins:\n  - {id: a, pr: 'https://github.com/o/r/pull/1', commit: '" + "a" * 40
                                        + "'}\nupstream: https://github.com/o/r\n")
    before = (tmp_path / "pins.yaml").read_bytes()
    r = _pinset("matrix", "--json", "pins.yaml", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr == "pinset matrix: error: --json pins.yaml: would overwrite the input file pins.yaml; " \
                       "write the output elsewhere\n"
    assert (tmp_path / "pins.yaml").read_bytes() == before


def test_bench_csv_over_the_model_end_to_end(tmp_path):
    (tmp_path / "m.gguf").write_bytes(b"GGUF\x03\x00\x00\x00model")
    (tmp_path / "b").mkdir()
    (tmp_path / "h").mkdir()
    r = _pinset("bench", "-m", "m.gguf", "--base-bin", "b", "--head-bin", "h", "--cpu", "--csv", "m.gguf",
                cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "would overwrite the input file m.gguf" in r.stderr and (tmp_path / "m.gguf").read_bytes() == b"GGUF\x03\x00\x00\x00model"


def test_the_role_is_declared_where_the_option_is_defined(tmp_path, monkeypatch):
    """add_path tags the action; the rule reads the role back from the chosen verb (a sub-verb too), runs each
    `derived` hook, and knows nothing of the verb's option names."""
    from pinset.commands.paths import add_path, check_arguments
    from pinset.errors import PinsetError

    monkeypatch.chdir(tmp_path)
    parser = cli.OneLineParser(prog="pinset")
    sub = parser.add_subparsers(dest="command")
    verb = sub.add_parser("tool").add_subparsers(dest="tool_verb").add_parser("make")
    add_path(verb, "--from", dest="origin", role=INPUT_FILE, derived=lambda args: {"queue": "the queue of --from"})
    add_path(verb, "--out", role=OUTPUT_FILE)
    add_path(verb, "--logs", role=OUTPUT_FOLDER, derived=lambda args: {"next": "the logs folder next to --out,"})
    (tmp_path / "a.json").write_text("[]")
    (tmp_path / "queue").mkdir()
    (tmp_path / "next").write_text("a file where a folder goes")

    def check(*argv):
        check_arguments(parser, parser.parse_args(["tool", "make", *argv]))

    with pytest.raises(PinsetError, match="^--out a.json: would overwrite the input file a.json;"):
        check("--from", "a.json", "--out", "a.json", "--logs", "logs")
    with pytest.raises(PinsetError, match="^--out queue/0001-x.patch: is in the input folder the queue of --from;"):
        check("--from", "a.json", "--out", "queue/0001-x.patch")
    with pytest.raises(PinsetError, match="^the logs folder next to --out, next: exists and is not a folder"):
        check("--from", "a.json", "--out", "b.json")
    with pytest.raises(ValueError, match="role 'outptu'"):
        add_path(verb, "--bad", role="outptu")  # type: ignore[arg-type]


def test_cache_json_dash_is_stdout_not_a_path(world, capsys):
    """`cache info --json` (or `--json -`) prints the JSON: "-" names no file, so a folder called "-" is no
    reason to refuse it (the verb said so; the one check in cli now says it from the declaration)."""
    root, calls = world
    (root / "-").mkdir()
    assert cli.main(["cache", "info", "--json"]) == 0, capsys.readouterr().err
    assert cli.main(["cache", "info", "--json", "-"]) == 0, capsys.readouterr().err
    assert calls == ["cache", "cache"]
    assert cli.main(["cache", "info", "--json", "./-"]) == 2       # a path is still one
    assert "--json -: is a folder; give a file name (nothing was run)" in capsys.readouterr().err
    assert calls == ["cache", "cache"]


def test_no_verb_checks_outputs_itself():
    """One check, in cli, before dispatch: no verb calls the rule (or could forget to)."""
    for path in sorted((ROOT / "pinset" / "commands").glob("*.py")):
        if path.name == "paths.py":   # the declarations and the check cli runs
            continue
        text = path.read_text(encoding="utf-8")
        assert "check_outputs" not in text and "check_arguments" not in text, path.name
