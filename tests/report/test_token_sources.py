"""Where the GitHub token comes from (issue 43): GITHUB_TOKEN, then GH_TOKEN (the gh CLI's variable), then
`gh auth token` (the gh CLI's stored login), each confined like GITHUB_TOKEN always was: sent only in the
Authorization header to the API origin, never printed or written. `gh` here is a fake program on PATH (a
shell script that answers as gh does), the API the fake GitHub on 127.0.0.1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pinset.cli import main
from pinset.github.client import find_token
from pinset.redact import redact
from tests.report.test_report_post import RESULTS
from tests.testing.fake_github import TOKEN

GH_SAYS = "gho_tokenOfTheGhCliThatMustNeverBePrinted"


def fake_gh(folder: Path, token: str | None) -> Path:
    """A `gh` that prints `token` for `gh auth token` (exit 0), or says it is not logged in (exit 1), and logs
    its arguments and whether it saw a token variable."""
    folder.mkdir(parents=True, exist_ok=True)
    gh = folder / "gh"
    answer = f'echo "{token}"' if token else 'echo "no oauth token found for $4" >&2; exit 1'
    gh.write_text(f'#!/bin/sh\necho "$@" "GITHUB_TOKEN=${{GITHUB_TOKEN:-}}" >> "{folder}/gh.log"\n{answer}\n')
    gh.chmod(0o755)
    return folder


@pytest.fixture
def gh(tmp_path, monkeypatch):
    def install(token: str | None) -> Path:
        folder = fake_gh(tmp_path / "bin", token)
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
        return folder
    return install


def test_the_order_of_the_sources(gh, monkeypatch):
    folder = gh(GH_SAYS)
    assert find_token() == GH_SAYS
    assert (folder / "gh.log").read_text() == "auth token --hostname github.com GITHUB_TOKEN=\n"
    monkeypatch.setenv("GH_TOKEN", "gh-variable-token")
    assert find_token() == "gh-variable-token"
    monkeypatch.setenv("GITHUB_TOKEN", " github-variable-token\n")
    assert find_token() == "github-variable-token"
    assert (folder / "gh.log").read_text().count("\n") == 1   # gh asked only when no variable has one


def test_gh_is_asked_for_the_apis_host(gh):
    folder = gh(GH_SAYS)
    find_token("https://ghe.example.com/api/v3")
    assert "auth token --hostname ghe.example.com" in (folder / "gh.log").read_text()


def test_gh_not_logged_in_is_no_token(gh, capsys):
    gh(None)
    assert find_token() is None
    assert main(["report", *RESULTS, "--post", "o/r#7"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "pinset report: error: --post needs a token in GITHUB_TOKEN, GH_TOKEN or `gh auth token` " \
                          "(or use --dry-run)"


def test_no_gh_installed_is_no_token(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert find_token() is None


@pytest.mark.parametrize("source", ["GH_TOKEN", "gh auth token"])
def test_a_post_with_each_source_sends_it_only_in_the_header(source, github, gh, monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("GITHUB_TOKEN")
    github.token = GH_SAYS
    if source == "GH_TOKEN":
        monkeypatch.setenv("GH_TOKEN", GH_SAYS)
    else:
        gh(GH_SAYS)
    md = tmp_path / "comment.md"
    assert main(["report", *RESULTS, "--post", "o/r#7", "--markdown", str(md)]) == 0
    out = capsys.readouterr()
    assert len(github.comments) == 1
    assert all(r[2].get("Authorization") == f"Bearer {GH_SAYS}" for r in github.requests)
    assert GH_SAYS not in out.out + out.err and GH_SAYS not in md.read_text()
    assert GH_SAYS not in github.comments[0]["body"]
    assert redact(f"token {GH_SAYS} here") == "token *** here"   # every later output is redacted of it too


def test_the_gh_token_is_refused_if_it_cannot_be_a_header(gh, capsys):
    gh("bad token")
    assert main(["report", *RESULTS, "--post", "o/r#7"]) == 2
    err = capsys.readouterr().err
    assert "`gh auth token` has a space, control or non-ASCII character" in err and "bad token" not in err


def test_the_token_is_never_in_the_gh_childs_environment(gh, monkeypatch):
    """gh is asked only when no variable holds a token; its environment never carries one anyway
    (runner.child_env drops the token variables for every child)."""
    folder = gh(GH_SAYS)
    monkeypatch.setenv("GITHUB_TOKEN", "")
    assert find_token() == GH_SAYS
    assert (folder / "gh.log").read_text().endswith("GITHUB_TOKEN=\n")
    assert TOKEN not in (folder / "gh.log").read_text()
