"""The reusable workflow installs pinset from its own repository and commit by default (issue 23 §5):
`pinset` is not on PyPI, so the old default `pinset-install: pinset` could not work."""

from __future__ import annotations

import os

import pytest
import yaml
from packaging.requirements import Requirement

from tests.packaging.test_workflows import REUSABLE, ROOT, bash, jobs, lint

SHA = "0123456789abcdef0123456789abcdef01234567"


def _install_steps():
    return [(name, s) for name, job in jobs().items() for s in job.get("steps", []) if s.get("name") == "install pinset"]


def _run_install(tmp_path, env):
    """The install step's script, with a `python3` that records what pip was asked to install."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    fake = tmp_path / "bin" / "python3"
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$ARGS_OUT"\n')
    fake.chmod(0o755)
    (name, s), *_ = _install_steps()
    full = {"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}", "ARGS_OUT": str(tmp_path / "args"),
            "GITHUB_SERVER_URL": "https://github.com", **env}
    result = bash(s["run"], tmp_path, full, job=name)
    args = (tmp_path / "args").read_text().splitlines() if (tmp_path / "args").exists() else None
    return result, args


def test_every_job_installs_pinset_from_the_workflows_own_repository_and_commit():
    doc = yaml.safe_load(REUSABLE.read_text())
    assert doc[True]["workflow_call"]["inputs"]["pinset-install"]["default"] == ""
    steps = _install_steps()
    assert {name for name, _ in steps} == {name for name, job in jobs().items() if "steps" in job}
    for _, s in steps:
        assert s["env"] == {"PINSET_REPOSITORY": "${{ job.workflow_repository }}", "PINSET_SHA": "${{ job.workflow_sha }}"}
    assert lint(REUSABLE).returncode == 0


def test_the_default_install_is_a_pip_requirement_naming_the_repository_at_the_commit(tmp_path):
    result, args = _run_install(tmp_path, {"PINSET_INSTALL": "", "PINSET_REPOSITORY": "acme/pinset", "PINSET_SHA": SHA})
    assert result.returncode == 0, result.stderr
    assert args[:3] == ["-m", "pip", "install"] and len(args) == 4
    req = Requirement(args[3])
    assert req.name == "pinset" and req.url == f"git+https://github.com/acme/pinset@{SHA}"


def test_an_explicit_requirement_wins(tmp_path):
    result, args = _run_install(tmp_path, {"PINSET_INSTALL": "pinset==0.1.0", "PINSET_REPOSITORY": "acme/pinset",
                                           "PINSET_SHA": SHA})
    assert result.returncode == 0 and args == ["-m", "pip", "install", "pinset==0.1.0"]


def test_no_repository_from_the_runner_is_an_error_not_a_guess(tmp_path):
    result, args = _run_install(tmp_path, {"PINSET_INSTALL": "", "PINSET_REPOSITORY": "", "PINSET_SHA": ""})
    assert result.returncode == 1 and args is None
    assert "::error::" in result.stdout and "pinset-install" in result.stdout


def test_the_example_leaves_the_default_install():
    example = yaml.safe_load((ROOT / "examples" / "nightly.yml").read_text())
    assert "pinset-install" not in example["jobs"]["pinset"]["with"]


def _run_cell_install(tmp_path, env, job="cell"):
    """The cell (or report) job's install step (kld, bench, bench results: the measure extra), as _run_install
    runs the first job's."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    fake = tmp_path / "bin" / "python3"
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$ARGS_OUT"\n')
    fake.chmod(0o755)
    (name, s), = [(n, s) for n, s in _install_steps() if n == job]
    full = {"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}", "ARGS_OUT": str(tmp_path / "args"),
            "GITHUB_SERVER_URL": "https://github.com", **env}
    result = bash(s["run"], tmp_path, full, job=name)
    return result, (tmp_path / "args").read_text().splitlines()


@pytest.mark.parametrize("job", ["cell", "report"])
def test_the_cell_and_report_jobs_install_the_measure_extra_sim_does_not(tmp_path, job):
    """Issue 42: kld and bench need `pinset[measure]`, and so does a report of bench results; sim and matrix run
    on the light install."""
    result, args = _run_cell_install(tmp_path, {"PINSET_INSTALL": "", "PINSET_REPOSITORY": "acme/pinset",
                                                "PINSET_SHA": SHA}, job)
    assert result.returncode == 0, result.stderr
    req = Requirement(args[3])
    assert req.name == "pinset" and req.extras == {"measure"} and req.url == f"git+https://github.com/acme/pinset@{SHA}"
    for given, wanted in (("pinset==0.1.0", "pinset[measure]==0.1.0"), ("pinset", "pinset[measure]"),
                          ("pinset[measure] @ git+https://x/y@v1", "pinset[measure] @ git+https://x/y@v1"),
                          ("./pinset-0.1.0.tar.gz", "./pinset-0.1.0.tar.gz")):
        result, args = _run_cell_install(tmp_path, {"PINSET_INSTALL": given, "PINSET_REPOSITORY": "acme/pinset",
                                                    "PINSET_SHA": SHA}, job)
        assert result.returncode == 0 and args[3] == wanted, (given, args)
    _, args = _run_install(tmp_path, {"PINSET_INSTALL": "", "PINSET_REPOSITORY": "acme/pinset", "PINSET_SHA": SHA})
    assert Requirement(args[3]).extras == set()   # the sim job's
    assert [n for n, _ in _install_steps()] == ["sim", "matrix", "cell", "report"]
