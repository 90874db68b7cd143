"""`pinset bump` and PR pins' pull requests (issue 43): the PR body says each PR's state, and a
`skip-unless-open` pin whose PR was merged is left out, so it cannot block the bump. Real repositories; a
fake GitHub on 127.0.0.1."""

from __future__ import annotations

import pytest

import pinset.github.client as github_module
from pinset.cli import main
from tests.testing import first_build, write_pins


@pytest.fixture(autouse=True)
def sleeps(monkeypatch):
    monkeypatch.setattr(github_module, "_default_sleep", lambda s: None)


def _project(make_repo, github):
    """upstream b1 and b2; PR 5 (other.txt, applies everywhere) and PR 6 (a.txt line 2, which b2 changes too:
    a conflict on b2); the distributor repository with pins.yaml shipping b1."""
    up, b1 = first_build(make_repo, {"a.txt": "1\n2\n3\n", "other.txt": "x\n"})
    up.git("checkout", "-q", "-b", "pr5")
    pr5 = up.commit("pr5", {"other.txt": "x\ny\n"})
    up.git("checkout", "-q", "-b", "pr6", "b1")
    pr6 = up.commit("pr6", {"a.txt": "1\ntwo\n3\n"})
    up.git("update-ref", "refs/pull/5/head", pr5)
    up.git("update-ref", "refs/pull/6/head", pr6)
    up.git("checkout", "-q", "master")
    up.commit("b2", {"a.txt": "1\nTWO\n3\n"})
    up.tag("b2")
    dist = make_repo("dist")
    write_pins(dist.path / "pins.yaml", f"""\
        upstream: {up.path}
        builds: [b1, b2]
        pins:
          - id: ggml-org#5
            pr: https://github.com/ggml-org/llama.cpp/pull/5
            commit: {pr5}
            unchecked: test
          - id: ggml-org#6
            pr: https://github.com/ggml-org/llama.cpp/pull/6
            commit: {pr6}
            unchecked: test
            skip-unless-open: true
    """)
    dist.git("add", "-A")
    dist.git("commit", "-q", "-m", "the pin set")
    github.add_pr("ggml-org/llama.cpp#5", [pr5, "c" * 40], review="CHANGES_REQUESTED")
    return dist, pr6


def test_a_merged_skip_unless_open_pin_does_not_block_and_the_body_says_each_pr(make_repo, github, capsys):
    dist, pr6 = _project(make_repo, github)
    github.add_pr("ggml-org/llama.cpp#6", [pr6], state="MERGED")
    assert main(["bump", "-c", str(dist.path / "pins.yaml"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "+builds: [b2, b2]" in out or "+builds: [b2" in out
    assert "`ggml-org#6`: PR merged: skipped (skip-unless-open)" in out
    assert "`ggml-org#5`: PR open, 1 commit behind its head ccccccccc, changes requested" in out


def test_an_open_skip_unless_open_pin_still_blocks(make_repo, github, capsys):
    dist, pr6 = _project(make_repo, github)
    github.add_pr("ggml-org/llama.cpp#6", [pr6])
    assert main(["bump", "-c", str(dist.path / "pins.yaml"), "--dry-run"]) == 1
    assert "ggml-org#6" in capsys.readouterr().out
