"""`--json -` is standard output on every verb (issue 43; `sim --json -` wrote a file named `-`): one rule where
output options are declared (pinset/commands/paths.add_path) and one place that writes (pinset.output.write_text);
the run's other output then goes to standard error, so standard output is the result alone and reads as JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pinset import cli
from pinset.commands.paths import OUTPUT_FILE, role_of
from tests.cli.test_outputs_inputs import VERBS
from tests.testing import ROOT, first_build, series, without_start, write_pins


@pytest.mark.parametrize("words, parser", [(w, p) for w, p in VERBS if any(
    "--json" in a.option_strings for a in p._actions)], ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_every_verbs_json_option_takes_dash_as_stdout(words, parser):
    action = next(a for a in parser._actions if "--json" in a.option_strings)
    assert role_of(action) == OUTPUT_FILE and getattr(action, "pinset_stdout") == "-"
    value = action.type("-") if action.type else "-"
    assert value == "-" and isinstance(value, str)   # a str, even where the option's type is Path
    if action.type:   # and `./-` a file
        assert not isinstance(action.type("./-"), str)


@pytest.fixture
def pins(make_repo, tmp_path):
    up, b1 = first_build(make_repo, {"a.txt": "".join(f"line {i}\n" for i in range(20))})
    series(up, b1, [("pin", {"a.txt": "".join(f"line {i}\n" for i in range(20)).replace("line 3\n", "line 3 p\n")})],
           tmp_path / "patches" / "p")
    return write_pins(tmp_path / "pins.yaml", f"upstream: {up.path}\nbuilds: [b1]\npins:\n  - id: p\n"
                                              f"    patches: {tmp_path / 'patches' / 'p'}\n")


def test_sim_json_dash_is_stdout_alone_and_no_file(pins, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["sim", "-c", str(pins), "--json", str(tmp_path / "file.json")]) == 0
    capsys.readouterr()
    assert cli.main(["sim", "-c", str(pins), "--json", "-"]) == 0
    out = capsys.readouterr()
    assert not (tmp_path / "-").exists()
    assert without_start(json.loads(out.out)) == without_start(json.loads((tmp_path / "file.json").read_text()))
    assert "every required pin applies" in out.err    # the table and verdict: on standard error


def test_a_real_process_reads_as_json(pins, tmp_path):
    """As a workflow runs it: `pinset sim --json - > result.json` (stdout a pipe, stderr apart)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "pinset", "sim", "-c", str(pins), "--json", "-"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["builds"][0]["pins"][0]["id"] == "p"
    assert not (tmp_path / "-").exists() and "pinset sim" in done.stderr


def test_markdown_dash_too_and_two_dashes_are_bad_input(pins, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["sim", "-c", str(pins), "--markdown", "-"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("| pin | b1") and "pinset sim" in out.err   # the markdown alone on stdout
    assert cli.main(["sim", "-c", str(pins), "--json", "-", "--markdown", "-"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["pinset sim: error: --json - and --markdown -: only one output can be standard output"]
    assert not (tmp_path / "-").exists()


def test_a_file_named_dash_is_still_reachable(pins, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["sim", "-c", str(pins), "--json", "./-"]) == 0
    capsys.readouterr()
    assert json.loads(Path(tmp_path / "-").read_text())["builds"]
