"""The composite action (action.yml, issue 43) run the way a runner runs it: each step's `env:` expressions
evaluated from the step's inputs and the `github` context, its `run:` script executed by
`bash --noprofile --norc -eo pipefail` (`shell: bash`) with the variables GitHub sets (GITHUB_OUTPUT,
GITHUB_ACTION_PATH, RUNNER_TEMP, GITHUB_WORKSPACE), and the step outputs read back from $GITHUB_OUTPUT as
GitHub parses it. Also the pre-commit hook's manifest."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from tests.testing import ROOT, GitRepo, first_build, series, write_pins

ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")
TOKEN = "ghs_actionTokenNeverShown"


def _evaluate(text: str, inputs: dict[str, str], github: dict[str, str]) -> str:
    def one(m: re.Match) -> str:
        scope, _, name = m[1].partition(".")
        table = {"inputs": inputs, "github": github}.get(scope)
        assert table is not None and name in table, f"expression {m[0]} is not one a composite step can use here"
        return table[name]
    return EXPRESSION.sub(one, text)


def parse_outputs(text: str) -> dict[str, str]:
    """$GITHUB_OUTPUT as the runner reads it: NAME=VALUE lines and NAME<<DELIMITER ... DELIMITER blocks."""
    out, lines, i = {}, text.split("\n"), 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, i + 1)
            out[name] = "\n".join(lines[i + 1:end])
            i = end + 1
        elif "=" in line:
            name, value = line.split("=", 1)
            out[name] = value
            i += 1
        else:
            i += 1
    return out


def run_action(workspace: Path, tmp: Path, given: dict[str, str]) -> tuple[int, dict[str, str], str]:
    """Every step of the action in order, as the runner would; (exit code of the first failing step or 0,
    the step `run`'s outputs, the log)."""
    inputs = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    github = {"action_path": str(ROOT), "token": TOKEN, "workspace": str(workspace)}
    inputs = {k: _evaluate(v, inputs, github) for k, v in inputs.items()} | given
    log, outputs = "", {}
    for n, step in enumerate(ACTION["runs"]["steps"]):
        assert step["shell"] == "bash"
        output_file = tmp / f"output-{n}"
        output_file.write_text("")
        env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "HOME": os.environ["HOME"],
               "PINSET_CACHE": os.environ["PINSET_CACHE"], "GITHUB_OUTPUT": str(output_file),
               "GITHUB_ACTION_PATH": str(ROOT), "GITHUB_WORKSPACE": str(workspace), "RUNNER_TEMP": str(tmp),
               "GITHUB_ACTIONS": "true", "CI": "true"}
        env |= {k: _evaluate(str(v), inputs, github) for k, v in step.get("env", {}).items()}
        script = tmp / f"step-{n}.sh"
        script.write_text(_evaluate(step["run"], inputs, github))
        result = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=workspace,
                                env=env, capture_output=True, text=True, timeout=300)
        log += result.stdout + result.stderr
        if step.get("id") == "run":
            outputs = parse_outputs(output_file.read_text())
        if result.returncode:
            return result.returncode, outputs, log
    return 0, outputs, log


def _workspace(make_repo, tmp_path) -> Path:
    up, b1 = first_build(make_repo, {"a.txt": "1\n2\n3\n"})
    series(up, b1, [("pin", {"a.txt": "1\ntwo\n3\n"})], tmp_path / "ws" / "patches" / "p", f"--base={b1}")
    up.commit("clash", {"a.txt": "1\nTWO\n3\n"})
    up.tag("b2")
    write_pins(tmp_path / "ws" / "pins.yaml", f"""
        upstream: {up.path}
        builds: [b1]
        pins:
          - id: p
            patches: patches/p
    """)
    return tmp_path / "ws"


def test_outputs_are_declared_from_the_run_step():
    for name, spec in ACTION["outputs"].items():
        assert spec["value"] == f"${{{{ steps.run.outputs.{name} }}}}"


def test_sim_through_the_action_gives_its_json_as_outputs(make_repo, tmp_path):
    ws = _workspace(make_repo, tmp_path)
    code, out, log = run_action(ws, tmp_path, {"verb": "sim", "install": "skip"})
    assert code == 0, log
    assert (out["exit-code"], out["ok"], out["kind"]) == ("0", "true", "sim")
    doc = json.loads(out["json"])
    assert doc["builds"][0]["pins"][0]["status"] == "applied" and Path(out["json-file"]).parent == tmp_path
    assert json.loads(Path(out["json-file"]).read_text()) == doc
    assert TOKEN not in log


def test_a_red_verb_fails_the_step_unless_told_not_to(make_repo, tmp_path):
    ws = _workspace(make_repo, tmp_path)
    code, out, log = run_action(ws, tmp_path, {"verb": "sim", "install": "skip", "args": "--builds b2"})
    assert code == 1 and out["ok"] == "false" and out["exit-code"] == "1", log
    code, out, log = run_action(ws, tmp_path, {"verb": "sim", "install": "skip", "args": "--builds b2",
                                               "fail-on-red": "false"})
    assert code == 0 and out["exit-code"] == "1" and "not failing the step" in log


def test_check_and_bad_input(make_repo, tmp_path):
    ws = _workspace(make_repo, tmp_path)
    code, out, log = run_action(ws, tmp_path, {"verb": "check", "install": "skip"})
    assert (code, out["exit-code"], out["json-file"], out["json"]) == (0, "0", "", ""), log
    assert "ok: pins.yaml: 1 pin" in log
    (ws / "other.yaml").write_text("builds: []\n")
    code, out, log = run_action(ws, tmp_path, {"verb": "check", "install": "skip", "config": "other.yaml"})
    assert code == 2 and out["exit-code"] == "2" and "other.yaml:1: builds: empty list" in log


def test_args_are_words_never_a_shell(make_repo, tmp_path):
    ws = _workspace(make_repo, tmp_path)
    code, _, log = run_action(ws, tmp_path, {"verb": "sim", "install": "skip",
                                             "args": "--builds 'b1; touch pwned' $(touch pwned2)"})
    assert code == 2 and not (ws / "pwned").exists() and not (ws / "pwned2").exists(), log


def test_the_install_step_installs_this_repository_by_default(tmp_path):
    """The default install is `python -m pip install $GITHUB_ACTION_PATH` (the action's own checkout): run with
    a python that records its arguments instead of installing."""
    fake = tmp_path / "bin" / "python3"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/calls\n')
    fake.chmod(0o755)
    step = ACTION["runs"]["steps"][0]
    env = {"PATH": os.environ["PATH"], "PINSET_INSTALL": "", "PINSET_PYTHON": str(fake), "ACTION_PATH": str(ROOT)}
    subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], env=env, check=True)
    assert (tmp_path / "calls").read_text().splitlines() == [f"-m pip install --quiet {ROOT}", "-m pinset --version"]


def test_pre_commit_hook_runs_pinset_check():
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    hook = next(h for h in hooks if h["id"] == "pinset-check")
    assert hook["entry"] == "pinset check" and hook["pass_filenames"] is False and hook["language"] == "python"
    files = re.compile(hook["files"])
    assert all(files.search(p) for p in ("pins.yaml", "sub/pins.yml", "patches/p/0001-x.patch"))
    assert not files.search("README.md")


def test_the_hook_runs_from_a_commit_like_pre_commit_runs_it(make_repo, tmp_path):
    """pre-commit runs the entry in the repository's top folder, with git's hook variables set: pinset check
    reads that repository's pins.yaml and never the index git is writing."""
    ws = _workspace(make_repo, tmp_path)
    repo = GitRepo(ws)
    repo.git("add", "-A")
    env = {**os.environ, "GIT_INDEX_FILE": str(ws / ".git" / "index.lock-not-there"), "GIT_DIR": str(ws / ".git"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(["pinset", "check"], cwd=ws, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("ok: pins.yaml"), result.stderr


def test_the_workflows_use_check_and_the_action():
    """The reusable workflow checks pins.yaml before its sim (which reads the PR pins' state with the job's
    token); the example nightly starts with the composite action running `pinset check`."""
    sim_steps = yaml.safe_load((ROOT / ".github" / "workflows" / "pinset.yml").read_text())["jobs"]["sim"]["steps"]
    names = [s.get("name") for s in sim_steps]
    assert names.index("pinset check") < names.index("pinset sim")
    assert "pinset check" in sim_steps[names.index("pinset check")]["run"]
    assert sim_steps[names.index("pinset sim")]["env"]["GITHUB_TOKEN"] == "${{ github.token }}"
    nightly = yaml.safe_load((ROOT / "examples" / "nightly.yml").read_text())["jobs"]
    action_step = next(s for s in nightly["check"]["steps"] if str(s.get("uses", "")).startswith("OWNER/pinset@"))
    assert action_step["with"] == {"verb": "check"} and nightly["pinset"]["needs"] == "check"
