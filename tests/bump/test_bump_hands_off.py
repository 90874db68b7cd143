"""`pinset bump` rewrites only commits it made (issue 40, class 6): a branch, local or the remote's, that holds
a commit pinset did not make is never force-pushed and never moved; pinset stops (exit 1), says so in one
line and, with --repo, in the branch's pull request, and names how to hand the branch back. Real repositories:
a local upstream, the distributor's repository, a local bare origin and a second clone of it where a
maintainer works; the fake GitHub for the pull request."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinset.bump import HELD_MARK
from pinset.bump.repo import Repository
from tests.bump.test_bump import bump, git, local_branch, no_token_anywhere, project, push, remote_branch, sleeps  # noqa: F401


def maintainer(tmp_path: Path, origin: Path, name: str = "maintainer") -> Path:
    """A clone of origin where a person works."""
    clone = tmp_path / name
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    return clone


def person(clone: Path, *args: str) -> str:
    """git as the maintainer (their own identity)."""
    import os
    import subprocess

    from tests.testing import GIT_ENV
    env = {**os.environ, **GIT_ENV, "GIT_AUTHOR_NAME": "Mia Maintainer", "GIT_AUTHOR_EMAIL": "mia@example.com",
           "GIT_COMMITTER_NAME": "Mia Maintainer", "GIT_COMMITTER_EMAIL": "mia@example.com"}
    return subprocess.run(["git", *args], cwd=clone, env=env, check=True, capture_output=True, text=True).stdout


def held_line(out: str) -> str:
    lines = [line for line in out.splitlines() if line.startswith("stopped: ")]
    assert len(lines) == 1, out
    return lines[0]


def test_the_bump_commit_carries_the_trailer_of_its_tree(project, github, capsys):
    _, dist, origin = project
    assert push(dist) == 0
    tip = remote_branch(origin)
    body = git(dist.path, "log", "-1", "--format=%B", tip)
    tree = git(dist.path, "rev-parse", f"{tip}^{{tree}}").strip()
    assert body.rstrip("\n").splitlines()[-1] == f"Pinset-Bump: {tree}"
    capsys.readouterr()


def test_a_maintainers_fix_on_the_bot_branch_is_never_overwritten(project, github, tmp_path, capsys):
    _, dist, origin = project
    assert push(dist) == 0
    bot = remote_branch(origin)
    clone = maintainer(tmp_path, origin)
    git(clone, "checkout", "-q", "pinset/bump")
    (clone / "pins.yaml").write_text((clone / "pins.yaml").read_text() + "# fixed by hand\n")
    person(clone, "commit", "-q", "-am", "fix the bump by hand")
    git(clone, "push", "-q", "origin", "pinset/bump")
    fixed = remote_branch(origin)
    dist.commit("unrelated", {"README": "hello\n"})   # a new bump commit would differ: it would be pushed
    capsys.readouterr()
    github.requests.clear()
    assert push(dist) == 1
    out = no_token_anywhere(capsys, tmp_path, dist.path, origin)
    assert remote_branch(origin) == fixed and local_branch(dist) == bot     # neither moved
    line = held_line(out.out)
    assert line.startswith("stopped: origin's pinset/bump holds a commit pinset did not make "
                           f"({fixed[:12]} by Mia Maintainer: 'fix the bump by hand')")
    assert "git push origin --delete pinset/bump" in line and "pinset bump --overwrite-branch" in line
    # the pull request says so too, in one comment of pinset's (updated in place, not repeated)
    comments = github.issue_comments[1]
    assert len(comments) == 1 and HELD_MARK in comments[0]["body"] and fixed[:12] in comments[0]["body"]
    assert github.pulls[0]["body"] != "" and [m for m, *_ in github.requests if m in ("PATCH",)] == []
    assert push(dist) == 1
    assert len(github.issue_comments[1]) == 1 and remote_branch(origin) == fixed
    capsys.readouterr()
    # handed back explicitly: the branch is pinset's again
    assert push(dist, "--overwrite-branch") == 0
    capsys.readouterr()
    now = remote_branch(origin)
    assert now not in (fixed, bot) and local_branch(dist) == now
    assert git(dist.path, "rev-parse", f"{now}^").strip() == dist.head()


def test_an_amended_bump_commit_is_not_pinsets(project, github, tmp_path, capsys):
    """The trailer names the commit's tree: amending the files (message kept) makes it a person's commit."""
    _, dist, origin = project
    assert push(dist) == 0
    clone = maintainer(tmp_path, origin)
    git(clone, "checkout", "-q", "pinset/bump")
    (clone / "pins.yaml").write_text((clone / "pins.yaml").read_text() + "# amended\n")
    person(clone, "commit", "-q", "-a", "--amend", "--no-edit")
    git(clone, "push", "-q", "-f", "origin", "pinset/bump")
    amended = remote_branch(origin)
    capsys.readouterr()
    assert push(dist) == 1
    assert remote_branch(origin) == amended
    assert f"({amended[:12]} by Mia Maintainer: 'pinset bump: b1 -> b3')" in held_line(capsys.readouterr().out)


def test_deleting_the_branch_hands_it_back(project, github, tmp_path, capsys):
    _, dist, origin = project
    assert push(dist) == 0
    clone = maintainer(tmp_path, origin)
    git(clone, "checkout", "-q", "pinset/bump")
    person(clone, "commit", "-q", "--allow-empty", "-m", "mine")
    git(clone, "push", "-q", "origin", "pinset/bump")
    assert push(dist) == 1
    git(origin, "branch", "-D", "pinset/bump")
    dist.git("branch", "-D", "pinset/bump")
    capsys.readouterr()
    assert push(dist) == 0 and remote_branch(origin) == local_branch(dist)
    capsys.readouterr()


def test_main_as_the_branch_is_never_moved_locally(project, capsys):
    """--branch master with the checkout on another branch: master holds the project's own commits, so it is
    not moved, even as a fast-forward."""
    _, dist, _ = project
    dist.git("checkout", "-q", "-b", "work")
    master = local_branch(dist, "master")
    assert bump(dist, "--branch", "master") == 1
    line = held_line(capsys.readouterr().out)
    assert line.startswith(f"stopped: the local branch master holds a commit pinset did not make ({master[:12]} by ")
    assert local_branch(dist, "master") == master


@pytest.mark.parametrize("merged", [False, True])
def test_the_remotes_default_branch_is_never_pushed(project, github, capsys, merged):
    """--branch master --push origin: origin's default branch (the pull request's base) is refused before any
    work, also when its tip is a bump commit merged there by a fast-forward (pinset's own, in HEAD's history)."""
    _, dist, origin = project
    if merged:
        assert push(dist) == 0
        dist.git("merge", "-q", "--ff-only", "pinset/bump")
        dist.git("push", "-q", "origin", "master")
    dist.git("checkout", "-q", "-b", "work")
    on_origin, master = remote_branch(origin, "master"), local_branch(dist, "master")
    capsys.readouterr()
    assert bump(dist, "--branch", "master", "--push", "origin") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["pinset bump: error: --branch master: the default branch of origin; a bump never moves it (its "
                   "commits are people's): name a branch of its own (default pinset/bump)"]
    assert remote_branch(origin, "master") == on_origin and local_branch(dist, "master") == master


def test_a_local_branch_with_a_persons_commit_is_not_moved(project, capsys):
    _, dist, _ = project
    assert bump(dist) == 0
    ours = local_branch(dist)
    dist.git("checkout", "-q", "pinset/bump")
    dist.commit("my local fix", {"NOTES": "mine\n"})
    mine = dist.head()
    dist.git("checkout", "-q", "master")
    dist.commit("unrelated", {"README": "hello\n"})
    capsys.readouterr()
    assert bump(dist) == 1
    assert local_branch(dist) == mine != ours
    assert "the local branch pinset/bump holds a commit pinset did not make" in held_line(capsys.readouterr().out)


def test_a_merged_bump_branch_is_still_pinsets(project, github, capsys):
    """Merged into master by a fast-forward: the branch's tip is in HEAD's history, and it is pinset's."""
    _, dist, origin = project
    assert push(dist, "--onto", "b2") == 0
    dist.git("merge", "-q", "--ff-only", "pinset/bump")
    dist.git("push", "-q", "origin", "master")
    capsys.readouterr()
    assert push(dist) == 0
    assert "b3" in git(dist.path, "show", f"{remote_branch(origin)}:pins.yaml")
    capsys.readouterr()


@pytest.mark.parametrize("before", ["a pinset branch", "no branch"])
def test_the_race_a_branch_that_moves_after_the_read_is_not_overwritten(project, github, tmp_path, capsys,
                                                                         monkeypatch, before):
    """A maintainer pushes onto the branch between pinset's read of it and its push: the push leases on the very
    value read, so git refuses it; the person's commit stays, the local branch does not move, one line says why."""
    _, dist, origin = project
    if before == "a pinset branch":
        assert push(dist) == 0
        dist.commit("unrelated", {"README": "hello\n"})
    first_local = local_branch(dist)
    clone = maintainer(tmp_path, origin)
    read = Repository.remote_tip

    def read_then_someone_pushes(self, remote, branch):
        tip = read(self, remote, branch)
        if before == "a pinset branch":
            git(clone, "checkout", "-q", "pinset/bump")
        else:
            git(clone, "checkout", "-q", "-b", "pinset/bump")
        person(clone, "commit", "-q", "--allow-empty", "-m", "pushed meanwhile")
        git(clone, "push", "-q", "origin", "pinset/bump")
        return tip

    monkeypatch.setattr(Repository, "remote_tip", read_then_someone_pushes)
    capsys.readouterr()
    assert push(dist) == 1
    err = no_token_anywhere(capsys, tmp_path, dist.path, origin).err
    theirs = git(clone, "rev-parse", "HEAD").strip()
    assert remote_branch(origin) == theirs and local_branch(dist) == first_local
    lines = [line for line in err.splitlines() if "error" in line]
    assert len(lines) == 1 and "the remote's pinset/bump moved since pinset read it" in lines[0], err
    assert "the local branch pinset/bump was not moved" in lines[0]
    monkeypatch.setattr(Repository, "remote_tip", read)
    assert push(dist) == 1   # the next run sees the person's commit: hands off
    assert remote_branch(origin) == theirs
    capsys.readouterr()


@pytest.mark.parametrize("hook, reason", [
    ("echo 'GH006: Protected branch update failed for refs/heads/pinset/bump.' >&2", "GH006: Protected branch update"),
    ("echo 'refused by the pre-receive test hook' >&2", "refused by the pre-receive test hook"),
])
def test_a_push_the_remote_refuses_is_one_line_with_its_reason(project, github, tmp_path, capsys, hook, reason):
    _, dist, origin = project
    (origin / "hooks" / "pre-receive").write_text(f"#!/bin/sh\n{hook}\nexit 1\n")
    (origin / "hooks" / "pre-receive").chmod(0o755)
    assert push(dist) == 1
    err = [line for line in no_token_anywhere(capsys, tmp_path, dist.path, origin).err.splitlines() if "error" in line]
    assert len(err) == 1
    assert err[0].startswith("pinset bump: error: git push origin pinset/bump: the remote refused it: "
                             "pre-receive hook declined (")
    assert reason in err[0] and err[0].endswith("(the local branch pinset/bump was not moved)")
    assert remote_branch(origin) is None and local_branch(dist) is None and github.requests == []
