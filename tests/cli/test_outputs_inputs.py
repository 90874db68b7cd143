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
import subprocess
import sys
from pathlib import Path

import pytest

from pinset import cli
from pinset.outputs_rule import (
    OUTPUT_FILES,
    OUTPUT_FOLDERS,
    kind_of,
    verb_parsers,
)
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


def test_every_option_of_every_verb_is_declared():
    """A new option must say whether it is an output, an input or no path, or this rule cannot see it."""
    undeclared = sorted({f"{' '.join(w)} {a.dest}" for w, p in VERBS for a in p._actions if kind_of(a) is None})
    assert not undeclared, f"declare these in pinset/outputs_rule.py: {undeclared}"
    outputs = {a.dest for _, p in VERBS for a in p._actions} & (OUTPUT_FILES | OUTPUT_FOLDERS)
    assert {"json", "markdown", "csv", "plot", "out", "logs", "log_dir"} <= outputs


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
                 "r1.json", "r2.json", "source.json"):
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
                "source": "source.json", "cache": "tree"}


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
        if value is None and not action.option_strings and action.nargs is None and action.dest != "help":
            value = "x"                                    # a required positional that names no path (a pin id)
        if value is None and action.required and action.option_strings:
            value = action.choices and next(iter(action.choices)) or (
                "req-out" if action.dest in OUTPUT_FOLDERS else "x")
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
    for dest in sorted(d for d, a in dests.items() if kind_of(a) in ("input-file", "input-folder")):
        assert dest in INPUT_VALUES, f"{dest}: a new input; give it a file or folder in INPUT_VALUES and world"
        value = INPUT_VALUES[dest]
        targets.append((dest, value, value))                       # the input itself
        if kind_of(dests[dest]) == "input-folder":
            targets.append((dest, value, f"{value}/llama-bench"))  # a file in it
    if "config" in dests:
        for patch in ("series", "series/0001-a.patch", "series/new.patch", "one.patch"):
            targets.append(("config", "pins.yaml", patch))
    out = []
    for dest, value, target in targets:
        new = target.endswith("/new.patch")
        folder = target == "series" or (kind_of(dests[dest]) == "input-folder" and target == value)
        for via in ("path", "symlink", "hardlink"):
            if via == "path" or not new and not (via == "hardlink" and folder):
                out.append((dest, value, target, via))
    return out


def _cases():
    for words, parser in VERBS:
        dests = {a.dest for a in parser._actions if kind_of(a) in ("output-file", "output-folder")}
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


@pytest.mark.parametrize("words,parser", [pytest.param(w, p, id="-".join(w)) for w, p in VERBS
                                          if len({a.dest for a in p._actions} & OUTPUT_FILES) >= 2])
def test_two_outputs_on_one_path_are_bad_input(world, capsys, words, parser):
    root, calls = world
    dests = {a.dest for a in parser._actions}
    files = sorted(dests & OUTPUT_FILES)
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


def test_an_action_can_declare_its_own_kind(tmp_path, monkeypatch):
    """A dest the table reads one way (`--out`, a folder) can be declared otherwise on its action."""
    from pinset.errors import PinsetError
    from pinset.outputs_rule import check_arguments, option_names

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pins.yaml").write_text("builds: [b1]\n")
    parser = cli.OneLineParser(prog="pinset")
    sub = parser.add_subparsers(dest="command")
    verb = sub.add_parser("import")
    verb.add_argument("--from", dest="source").pinset_io = "input-file"
    verb.add_argument("--out").pinset_io = "output-file"
    argv = ["import", "--from", "pr-set.json", "--out", "pr-set.json"]
    (tmp_path / "pr-set.json").write_text("[]")
    with pytest.raises(PinsetError, match="would overwrite the input file pr-set.json"):
        check_arguments(parser.parse_args(argv), *option_names(parser, argv))
    verb.add_argument("--bad").pinset_io = "outptu"
    with pytest.raises(ValueError, match="pinset_io 'outptu'"):
        option_names(parser, argv)
