"""The workflows pinset ships: actionlint (with shellcheck on the run: scripts) finds nothing, the structure
that keeps a failed or cancelled cell visible is there, and the cell and report scripts do what they say when
run with bash like Actions runs them."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.report.test_report_cells import B35, B36, FIX, UUID0, cell_verify, matrix_json
from tests.testing import ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml")) + sorted((ROOT / "examples").glob("*.yml"))
REUSABLE = ROOT / ".github" / "workflows" / "pinset.yml"


def actionlint() -> str:
    """The actionlint binary of the test extras (next to this Python, or on PATH); missing is a failure, not
    a skip: an unchecked workflow must not read as a checked one."""
    here = Path(sys.executable).parent / "actionlint"
    found = str(here) if here.exists() else shutil.which("actionlint")
    assert found, "actionlint not installed: pip install -e .[test]"
    return found


def lint(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([actionlint(), "-no-color", *map(str, paths)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_shipped_workflows_have_no_finding():
    assert REUSABLE in WORKFLOWS and len(WORKFLOWS) >= 2
    result = lint(*WORKFLOWS)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_actionlint_does_find_a_broken_workflow(tmp_path):
    # the check above can fail: a workflow with an unknown matrix key and a bad expression is reported
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(REUSABLE.read_text().replace("${{ matrix.artifact }}", "${{ matrix.artefact ").replace(
        "needs: [sim, matrix, cell]", "needs: [sim, matrix, cells]"))
    result = subprocess.run([actionlint(), "-no-color", str(bad)], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "cells" in result.stdout


def jobs() -> dict:
    return yaml.safe_load(REUSABLE.read_text())["jobs"]


def step(job: str, name: str) -> dict:
    return next(s for s in jobs()[job]["steps"] if s.get("name") == name)


def test_no_cell_goes_missing_silently():
    j = jobs()
    cell = j["cell"]
    assert cell["strategy"]["fail-fast"] is False
    assert "fromJSON(needs.matrix.outputs.matrix)" in cell["strategy"]["matrix"]
    upload = next(s for s in cell["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert upload["if"] == "always()" and upload["with"]["name"] == "${{ matrix.artifact }}"
    report = j["report"]
    assert report["if"] == "always()" and set(report["needs"]) == {"sim", "matrix", "cell"}
    report_step = step("report", "pinset report")
    assert report_step["env"]["MATRIX"] == "${{ needs.matrix.outputs.matrix }}"
    assert "--expect report/matrix.json" in report_step["run"]



def test_a_rerun_replaces_the_earlier_attempts_artifact():
    """Re-run failed jobs uploads under the same name: without `overwrite` the upload fails (409) and the report
    reads the earlier attempt's result as the last one (a cell that failed on re-run would show its old pass).
    And the cell has a file to upload from its first step on, so an attempt that fails early replaces it too."""
    for name, job in jobs().items():
        for s in job["steps"]:
            if str(s.get("uses", "")).startswith("actions/upload-artifact"):
                assert s["with"].get("overwrite") is True, name
    steps = jobs()["cell"]["steps"]
    first = steps[1]
    assert str(steps[0]["uses"]).startswith("actions/checkout") and first["env"]["RESULTS"] == "${{ matrix.results }}"
    assert '> "$RESULTS/attempt.txt"' in first["run"]

def test_token_permissions_are_minimal():
    doc = yaml.safe_load(REUSABLE.read_text())
    assert doc["permissions"] == {"contents": "read"}
    writers = {name: j["permissions"] for name, j in doc["jobs"].items() if "permissions" in j}
    assert writers == {"report": {"contents": "read", "pull-requests": "write"}}
    nightly = yaml.safe_load((ROOT / "examples" / "nightly.yml").read_text())
    assert nightly["permissions"] == {"contents": "read"}
    assert set(nightly[True]) == {"schedule", "workflow_dispatch"}  # YAML 1.1 reads `on` as true
    writes = {name: j.get("permissions") for name, j in nightly["jobs"].items()
              if "write" in (j.get("permissions") or {}).values()}
    assert writes["bump"] == {"contents": "write", "pull-requests": "write"}
    assert [name for name, p in writes.items() if p.get("contents") == "write"] == ["bump", "history"]
    assert writes["history"] == {"contents": "write", "pages": "write", "id-token": "write"}


def test_the_nightly_history_keeps_each_night_on_its_own_branch_and_publishes_the_page():
    """examples/nightly.yml: the history job commits the night (the reusable workflow's pinset-night artifact and
    the forecast) to pinset-results only, reads that folder with `pinset history` and publishes the page."""
    nightly = yaml.safe_load((ROOT / "examples" / "nightly.yml").read_text())
    job = nightly["jobs"]["history"]
    assert job["needs"] == ["pinset", "forecast"] and "cancelled()" in job["if"]
    scripts = "\n".join(s.get("run", "") for s in job["steps"])
    assert [line.split()[-1] for line in scripts.splitlines() if " push " in line] == ["pinset-results"]
    assert "pinset history results -c pins.yaml --html page/index.html" in scripts
    assert 'cat page/summary.md >> "$GITHUB_STEP_SUMMARY"' in scripts
    uses = [s.get("uses", "") for s in job["steps"]]
    assert any(u.startswith("actions/upload-pages-artifact") for u in uses)
    reusable = yaml.safe_load(REUSABLE.read_text())
    assert any(s.get("with", {}).get("name") == "pinset-night" for s in reusable["jobs"]["report"]["steps"])


def test_the_nightly_bump_comes_after_the_report_and_keeps_one_pr():
    """examples/nightly.yml: the bump job runs after sim/verify/report (the reusable workflow's job), hands it
    every result, pushes its own branch and names the repository for the pull request; the token comes from
    the job (never a secret written into a file)."""
    nightly = yaml.safe_load((ROOT / "examples" / "nightly.yml").read_text())
    job = nightly["jobs"]["bump"]
    assert job["needs"] == "pinset" and "cancelled()" in job["if"]
    assert nightly["jobs"]["pinset"]["uses"].endswith("/.github/workflows/pinset.yml@REF")
    run = next(s for s in job["steps"] if s.get("name") == "pinset bump")
    assert run["env"]["GITHUB_TOKEN"] == "${{ github.token }}" and run["shell"] == "bash"
    assert 'pinset bump -c pins.yaml "${results[@]}" --push origin --repo "$REPO"' in run["run"]
    assert "--branch" not in run["run"]   # the default pinset/bump: one branch, one PR, night after night
    download = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact"))
    assert download["with"]["pattern"] == "pinset-*"


# how Actions runs a `run:` script, by the shell the workflow names (GitHub's docs, "defaults.run.shell")
SHELLS = {None: ["bash", "-e"], "bash": ["bash", "--noprofile", "--norc", "-eo", "pipefail"]}


def shell_of(job: str) -> list[str]:
    doc = yaml.safe_load(REUSABLE.read_text())
    named = ((doc["jobs"][job].get("defaults") or {}).get("run") or doc.get("defaults", {}).get("run") or {}).get("shell")
    return SHELLS[named]


def bash(script: str, cwd: Path, env: dict, job: str = "cell") -> subprocess.CompletedProcess:
    """A run: script of `job` as Actions runs it: with the shell the workflow names for it."""
    path = cwd / "step.sh"
    path.write_text(script)
    return subprocess.run([*shell_of(job), str(path)], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=300)


def test_cell_runs_every_command_and_fails_when_one_failed(tmp_path):
    # the first command fails as pinset does in a cell: its output piped into the cell log by `tee`
    script = "false\necho second > \"$RESULTS/second.txt\"\nexit 0"
    result = bash(step("cell", "run the cell")["run"], tmp_path,
                  {"CELL_SCRIPT": script, "RESULTS": "out/cell", "PATH": os.environ["PATH"]})
    assert result.returncode == 1  # the first command failed: the cell is red
    assert (tmp_path / "out/cell/second.txt").read_text() == "second\n"  # and the second still ran
    assert bash(step("cell", "run the cell")["run"], tmp_path,
                {"CELL_SCRIPT": "true\ntrue", "RESULTS": "out/c2"}).returncode == 0


@pytest.fixture
def python3_is_this_python(tmp_path):
    """`python3 -m pinset` in the scripts runs this pinset."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # A script, not a symlink: a symlink outside a venv's folder starts the venv's base interpreter
    # (Python finds pyvenv.cfg beside the path it was started as), without the venv's packages.
    wrapper = bin_dir / "python3"
    wrapper.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} \"$@\"\n")
    wrapper.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
            "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}


def test_report_step_lists_a_cancelled_cell(tmp_path, python3_is_this_python):
    env = {**python3_is_this_python, "TARGET": ""}
    cells = tmp_path / "cells"
    for artifact, src in (("pinset-sim", FIX / "sim.json"), ("pinset-kld", FIX / "kld-h200.json"),
                          ("pinset-bench", FIX / "bench-h200.json")):
        (cells / artifact).mkdir(parents=True)
        shutil.copy(src, cells / artifact / (src.name.split("-")[0].removesuffix(".json") + ".json"))
    (cells / "pinset-a").mkdir()
    cell_verify(cells / "pinset-a", "verify", UUID0)
    (cells / "pinset-b" / "logs").mkdir(parents=True)  # cancelled: logs only, no verify.json
    # the matrix job's output, not an artifact: the artifact of the matrix is not even downloaded here
    env["MATRIX"] = matrix_json(tmp_path, [(B36, "h200", ["verify"]), (B35, "h200", ["verify"])]).read_text()
    run = step("report", "pinset report")["run"].replace('-c "$PINSET_CONFIG" ', "")  # no pins.yaml here
    result = bash(run, tmp_path, env, job="report")
    text = (tmp_path / "report/report.md").read_text()
    assert result.returncode == 1, result.stderr
    assert f"cell {B35} on h200: no verify result" in text
    assert json.loads((tmp_path / "report/report.json").read_text())["outcome"] == "not enough evidence"
    assert (tmp_path / "summary.md").read_text() == text


def test_matrix_step_hands_the_whole_matrix_to_the_next_job(tmp_path, python3_is_this_python):
    # the step's output line must hold the whole JSON: a multi-line file would pass "{" and break the job
    from tests.matrix.test_matrix import B36, ONE, pins, sim_json

    cfg = pins(tmp_path, ONE + "  a100: {runs-on: gpu-a100, architectures: \"80\"}\n")
    (tmp_path / "sim").mkdir()
    sim_json(tmp_path, cfg, {B36: "applied"}).rename(tmp_path / "sim" / "sim.json")
    output = tmp_path / "github_output"
    env = {**python3_is_this_python, "PINSET_CONFIG": str(cfg), "GITHUB_OUTPUT": str(output), "BUILDS": "",
           "GPUS": "", "VERIFY_ARGS": "--op-jobs 4", "KLD_MODEL": "", "BENCH_MODEL": "", "BENCH_ARGS": "-p 512"}
    result = bash(step("matrix", "pinset matrix")["run"], tmp_path, env, job="matrix")
    assert result.returncode == 0, result.stderr
    (line,) = output.read_text().splitlines()
    key, value = line.split("=", 1)
    cells = json.loads(value)["include"]
    assert key == "matrix" and [c["gpu"] for c in cells] == ["h200", "a100"]
    assert all(c["commands"][0].startswith("python3 -m pinset verify ") for c in cells)


def test_a_ccache_url_with_credentials_can_come_from_a_secret(tmp_path):
    """A caller's `with:` cannot read secrets (actionlint: context "secrets" is not allowed here): a remote
    storage URL that holds a password reaches the cells through the reusable workflow's own secret."""
    wf = tmp_path / ".github" / "workflows"
    wf.mkdir(parents=True)
    shutil.copy(REUSABLE, wf / "pinset.yml")
    caller = ("name: c\non: workflow_dispatch\njobs:\n  pinset:\n    uses: ./.github/workflows/pinset.yml\n"
              "    permissions: {contents: read, pull-requests: write}\n")
    (wf / "by-secret.yml").write_text(caller + "    secrets:\n      CCACHE_REMOTE_STORAGE: ${{ secrets.CACHE_URL }}\n")
    assert lint_in(tmp_path, wf / "by-secret.yml").returncode == 0
    (wf / "by-input.yml").write_text(caller + "    with:\n      ccache-remote-storage: ${{ secrets.CACHE_URL }}\n")
    result = lint_in(tmp_path, wf / "by-input.yml")
    assert result.returncode != 0 and 'context "secrets" is not allowed here' in result.stdout
    assert jobs()["cell"]["env"]["CCACHE_REMOTE_STORAGE"] == \
        "${{ secrets.CCACHE_REMOTE_STORAGE || inputs.ccache-remote-storage }}"


def lint_in(root: Path, path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([actionlint(), "-no-color", str(path.relative_to(root))], capture_output=True, text=True,
                          cwd=root, timeout=120)


def test_report_step_without_a_matrix_expects_nothing(tmp_path, python3_is_this_python):
    # the matrix job failed or found no green build: no cell ran, the report judges what there is
    env = {**python3_is_this_python, "TARGET": "", "MATRIX": ""}
    (tmp_path / "cells" / "pinset-sim").mkdir(parents=True)
    shutil.copy(FIX / "sim.json", tmp_path / "cells" / "pinset-sim" / "sim.json")
    run = step("report", "pinset report")["run"].replace('-c "$PINSET_CONFIG" ', "")
    result = bash(run, tmp_path, env, job="report")
    assert result.returncode == 1, result.stderr
    assert "no verify, kld, bench result" in (tmp_path / "report/report.md").read_text()
    assert not (tmp_path / "report/matrix.json").exists()


def nightly_forecast_steps() -> dict:
    job = yaml.safe_load((ROOT / "examples" / "nightly.yml").read_text())["jobs"]["forecast"]
    return {s.get("name"): s for s in job["steps"]}


def test_nightly_forecast_job_may_write_issues_only():
    job = yaml.safe_load((ROOT / "examples" / "nightly.yml").read_text())["jobs"]["forecast"]
    assert job["permissions"] == {"contents": "read", "issues": "write"}
    run = nightly_forecast_steps()["pinset forecast"]["run"]
    assert "pinset forecast" in run and "--markdown forecast.md" in run and "--json forecast.json" in run


@pytest.mark.parametrize("existing", ["", "42"])
def test_nightly_forecast_keeps_one_tracking_issue(tmp_path, existing):
    """The issue step edits the open tracking issue when `gh issue list` finds one, creates one only when none
    is open: one issue kept up to date, not a new one each night. `gh` is a fake that records its calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text('#!/bin/bash\necho "$*" >> "$GH_LOG"\nif [ "$1 $2" = "issue list" ]; then echo "$EXISTING"; fi\n')
    gh.chmod(0o755)
    (tmp_path / "forecast.md").write_text("<!-- pinset-forecast o/r -->\nbody\n")
    step = nightly_forecast_steps()["update the tracking issue"]
    for night in (1, 2):
        script = tmp_path / "step.sh"
        script.write_text(step["run"])
        result = subprocess.run(["bash", "-e", str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                                env={**os.environ, **step["env"], "PATH": f"{bin_dir}:{os.environ['PATH']}",
                                     "GH_LOG": str(tmp_path / "gh.log"), "EXISTING": existing, "GH_TOKEN": "t"})
        assert result.returncode == 0, result.stderr
    calls = (tmp_path / "gh.log").read_text().splitlines()
    writes = [c for c in calls if not c.startswith("issue list")]
    if existing:
        assert writes == ["issue edit 42 --body-file forecast.md"] * 2
    else:  # the fake never lists what it created: each night it is asked to create (a real gh would list it)
        assert all(c.startswith("issue create --title pinset forecast: ") for c in writes) and len(writes) == 2


@pytest.mark.parametrize(("rc", "written", "passes"), [(0, True, True), (1, True, True), (1, False, False),
                                                     (2, False, False)])
def test_nightly_forecast_step_fails_only_without_a_forecast(tmp_path, rc, written, passes):
    """Exit 1 with the forecast written is news for the issue (the step passes, with a warning); exit 1 or 2
    without it is a failure of the step."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "pinset"
    write = 'echo "{}" > forecast.json; echo md > forecast.md\n' if written else ""
    fake.write_text(f"#!/bin/bash\n{write}exit {rc}\n")
    fake.chmod(0o755)
    script = tmp_path / "step.sh"
    script.write_text(nightly_forecast_steps()["pinset forecast"]["run"])
    result = subprocess.run(["bash", "-e", str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert (result.returncode == 0) is passes
