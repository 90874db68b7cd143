"""`pinset bump` on real repositories: a local upstream, a distributor repository with a local bare origin,
and a fake GitHub on 127.0.0.1 for the pull request (tests/testing/fake_github.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import pinset.github.client as github_module
from pinset.cli import main
from tests.testing import GIT_ENV, GitRepo, first_build, git_am_3, series, write_pins
from tests.testing.fake_github import TOKEN
from tests.testing.sim import run_sim

LINES = "".join(f"line {i}\n" for i in range(1, 41))
PINS = """\
# the pin set we ship (a comment of ours)
upstream: {up}
builds: [b1, "tags:b*:3"]   # first: the shipped build
pins:
  - id: p
    patches: patches/p   # my comment
    unchecked: test
  - id: q   # exact everywhere
    patches: patches/q
    unchecked: test
"""


def git(cwd: Path, *args: str, check: bool = True) -> str:
    import os
    return subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, check=check,
                          capture_output=True, text=True).stdout


@pytest.fixture(autouse=True)
def sleeps(monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr(github_module, "_default_sleep", waits.append)
    return waits


@pytest.fixture
def project(make_repo, tmp_path):
    """Upstream b1..b4 (b2: the pin's context moved, b3: a line beside it changed (3-way), b4: its own line
    changed: conflict); the distributor repository `dist` with pins.yaml and the series, pushed to `origin.git`."""
    up, b1 = first_build(make_repo, {"a.txt": LINES, "other.txt": "x\n"})
    dist = make_repo("dist")
    series(up, b1, [("change line 20", {"a.txt": LINES.replace("line 20\n", "line 20 pinned\n")}),
                    ("change line 30", {"a.txt": LINES.replace("line 20\n", "line 20 pinned\n")
                                                   .replace("line 30\n", "line 30 pinned\n")})],
           dist.path / "patches" / "p", f"--base={b1}")
    series(up, b1, [("other", {"other.txt": "x\ny\n"})], dist.path / "patches" / "q", f"--base={b1}")
    top = "".join(f"top {i}\n" for i in range(5))
    up.commit("moved", {"a.txt": top + LINES})
    up.tag("b2")
    up.commit("beside", {"a.txt": top + LINES.replace("line 18\n", "line 18 upstream\n")})
    up.tag("b3")
    up.commit("clash", {"a.txt": top + LINES.replace("line 18\n", "line 18 upstream\n")
                        .replace("line 20\n", "line 20 upstream\n")})
    up.tag("b4")
    write_pins(dist.path / "pins.yaml", PINS.format(up=up.path))
    dist.git("add", "-A")
    dist.git("commit", "-q", "-m", "the pin set")
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    dist.git("remote", "add", "origin", str(origin))
    dist.git("push", "-q", "origin", "master")
    return up, dist, origin


def bump(dist: GitRepo, *extra: str) -> int:
    return main(["bump", "-c", str(dist.path / "pins.yaml"), *extra])


def push(dist: GitRepo, *extra: str) -> int:
    return bump(dist, "--push", "origin", "--repo", "o/r", *extra)


def remote_branch(origin: Path, branch: str = "pinset/bump") -> str | None:
    out = git(origin, "rev-parse", "-q", "--verify", f"refs/heads/{branch}", check=False).strip()
    return out or None


def local_branch(dist: GitRepo, branch: str = "pinset/bump") -> str | None:
    out = git(dist.path, "rev-parse", "-q", "--verify", f"refs/heads/{branch}", check=False).strip()
    return out or None


def checkout_state(dist: GitRepo) -> tuple:
    """Everything of the user's checkout a bump must leave alone: HEAD, its branch, index, files, status."""
    files = {p.relative_to(dist.path).as_posix(): p.read_bytes() for p in dist.path.rglob("*")
             if p.is_file() and ".git" not in p.relative_to(dist.path).parts}
    return (git(dist.path, "rev-parse", "HEAD"), git(dist.path, "symbolic-ref", "HEAD"),
            git(dist.path, "ls-files", "-s"), git(dist.path, "status", "--porcelain", "--untracked-files=all"),
            git(dist.path, "diff", "--cached"), files)


def no_token_anywhere(capsys, tmp_path: Path, *repos: Path):
    out = capsys.readouterr()
    for text in (out.out, out.err):
        assert TOKEN not in text
    for p in tmp_path.rglob("*"):
        if p.is_file() and not p.is_symlink():
            assert TOKEN.encode() not in p.read_bytes(), p
    for repo in repos:
        assert TOKEN not in git(repo, "log", "--all", "-p")
        assert TOKEN not in git(repo, "config", "--list")
    return out


def test_bump_pushes_a_refreshed_series_that_git_am_applies_and_opens_one_pr(project, github, tmp_path, capsys):
    up, dist, origin = project
    before = checkout_state(dist)
    assert main(["apply", "-c", str(dist.path / "pins.yaml"), "--build", "b3", "--out", str(tmp_path / "applied")]) == 0
    capsys.readouterr()
    assert push(dist) == 0
    out = no_token_anywhere(capsys, tmp_path, dist.path, origin)
    assert checkout_state(dist) == before          # the user's checkout, branch and index: untouched
    tip = remote_branch(origin)
    assert tip and tip == local_branch(dist)
    assert git(origin, "rev-parse", f"{tip}^").strip() == dist.head()   # one commit on HEAD
    # pins.yaml: only the first build changed; comments, quoting and order kept
    assert git(origin, "show", f"{tip}:pins.yaml") == PINS.format(up=up.path).replace("[b1, ", "[b3, ")
    message = git(origin, "show", "-s", "--format=%B", tip)
    assert message.startswith("pinset bump: b1 -> b3") and "- p: 3-way -> exact (2 patches)" in message
    assert "- q" not in message   # exact already: not refreshed
    changed = git(origin, "diff", "--name-only", f"{tip}^", tip).split()
    assert changed == ["patches/p/0001-change-line-20.patch", "patches/p/0002-change-line-30.patch", "pins.yaml"]
    # the pushed series applies with plain `git am` (no -3) on b3 and gives `pinset apply`'s tree
    check = tmp_path / "check"
    git(tmp_path, "clone", "-q", str(up.path), str(check))
    git(check, "checkout", "-q", "--detach", "b3")
    series_dir = tmp_path / "pushed"
    series_dir.mkdir()
    subprocess.run(f"git -C {origin} archive {tip} patches | tar -x -C {series_dir}", shell=True, check=True)
    for pin in ("p", "q"):
        git(check, "am", "-q", *sorted(str(f) for f in (series_dir / "patches" / pin).glob("*.patch")))
    status = git(tmp_path, f"--git-dir={check}/.git", f"--work-tree={tmp_path / 'applied'}", "status", "--porcelain")
    assert status == ""
    # the pull request: one, on the branch, its body the report plus the range-diff
    assert len(github.pulls) == 1
    pull = github.pulls[0]
    assert pull["head"]["ref"] == "pinset/bump" and pull["base"]["ref"] == "master"
    assert pull["title"] == "pinset: ship b3 (was b1)"
    assert "<!-- pinset:" in pull["body"] and "range-diff of the refreshed pins" in pull["body"]
    assert "change line 20" in pull["body"]
    assert f"created pull request: {pull['html_url']}" in out.out
    assert [(m, p.split("?")[0]) for m, p, *_ in github.requests] == [("GET", "/repos/o/r/pulls"),
                                                                      ("POST", "/repos/o/r/pulls")]
    assert "head=o%3Apinset%2Fbump" in github.requests[0][1] or "head=o:pinset/bump" in github.requests[0][1]


def test_a_second_run_updates_the_same_pr_and_pushes_nothing_new(project, github, tmp_path, capsys):
    _, dist, origin = project
    assert push(dist) == 0
    tip = remote_branch(origin)
    github.pulls[0]["body"] = "edited by someone"
    github.requests.clear()
    assert push(dist) == 0
    out = no_token_anywhere(capsys, tmp_path, dist.path, origin)
    assert remote_branch(origin) == tip == local_branch(dist)     # the same commit: nothing pushed
    assert "on the remote is up to date" in out.out
    assert len(github.pulls) == 1 and "<!-- pinset:" in github.pulls[0]["body"]
    assert [m for m, *_ in github.requests] == ["GET", "PATCH"]
    assert "updated pull request" in out.out
    github.requests.clear()
    assert push(dist) == 0                                        # nothing changed at all: nothing written
    assert [m for m, *_ in github.requests] == ["GET"]
    assert "unchanged pull request" in capsys.readouterr().out


def test_a_moved_head_is_pushed_again_with_a_lease_onto_the_same_pr(project, github, tmp_path, capsys):
    _, dist, origin = project
    assert push(dist) == 0
    first = remote_branch(origin)
    dist.commit("unrelated", {"README": "hello\n"})
    dist.git("push", "-q", "origin", "master")
    assert push(dist) == 0
    second = remote_branch(origin)
    assert second != first and git(origin, "rev-parse", f"{second}^").strip() == dist.head()
    assert local_branch(dist) == second and len(github.pulls) == 1
    capsys.readouterr()


def test_a_required_pin_that_conflicts_pushes_nothing(project, github, tmp_path, capsys):
    _, dist, origin = project
    before = checkout_state(dist)
    assert push(dist, "--onto", "b4") == 1
    out = no_token_anywhere(capsys, tmp_path, dist.path, origin)
    assert "p on b4: conflict" in out.out and "pinset rebase p --onto b4" in out.out
    assert "nothing pushed" in out.out
    assert remote_branch(origin) is None and local_branch(dist) is None
    assert github.pulls == [] and github.requests == []
    assert checkout_state(dist) == before


def test_uncommitted_edits_are_untouched_left_out_and_warned_about(project, tmp_path, capsys):
    _, dist, _ = project
    (dist.path / "pins.yaml").write_text((dist.path / "pins.yaml").read_text() + "# not committed yet\n")
    patch = dist.path / "patches" / "q" / "0001-other.patch"
    patch.write_text(patch.read_text() + "\n")
    dist.git("add", str(patch))
    (dist.path / "untracked.txt").write_text("mine\n")
    before = checkout_state(dist)
    assert bump(dist) == 0
    out = capsys.readouterr()
    assert checkout_state(dist) == before
    assert "warning:" in out.err and "pins.yaml" in out.err and "not in the bump" in out.err
    tip = local_branch(dist)
    assert tip and "# not committed yet" not in git(dist.path, "show", f"{tip}:pins.yaml")
    assert git(dist.path, "show", f"{tip}:patches/q/0001-other.patch") == git(dist.path, "show",
                                                                                "HEAD:patches/q/0001-other.patch")
    assert not git(dist.path, "worktree", "list", "--porcelain").count("worktree ") > 1   # the temporary one: gone


@pytest.mark.parametrize("fault", ["push", "pull request"])
def test_the_local_branch_does_not_move_when_push_or_pr_fails(project, github, tmp_path, capsys, fault):
    _, dist, origin = project
    if fault == "push":
        hook = origin / "hooks" / "pre-receive"
        hook.write_text("#!/bin/sh\necho refused by the test >&2\nexit 1\n")
        hook.chmod(0o755)
    else:
        github.fail = (500, {"message": "boom"}, {})
    assert push(dist) == 1
    err = no_token_anywhere(capsys, tmp_path, dist.path, origin).err
    assert local_branch(dist) is None
    if fault == "push":
        assert "git push origin pinset/bump" in err and "was not moved" in err
        assert remote_branch(origin) is None and github.requests == []
    else:
        assert "HTTP 500" in err and github.pulls == []


def test_dry_run_shows_the_change_and_the_body_and_does_nothing(project, github, tmp_path, capsys):
    _, dist, origin = project
    before = checkout_state(dist)
    assert push(dist, "--dry-run") == 0
    out = no_token_anywhere(capsys, tmp_path, dist.path, origin).out
    assert "-builds: [b1, " in out and "+builds: [b3, " in out
    assert "refreshed p: patches/p/0001-change-line-20.patch, patches/p/0002-change-line-30.patch" in out
    assert "<!-- pinset:" in out and "range-diff of the refreshed pins" in out
    assert "POST " in out and "Bearer ***" in out
    assert remote_branch(origin) is None and local_branch(dist) is None
    assert github.requests == [] and checkout_state(dist) == before


def test_a_pr_opened_meanwhile_is_updated_not_doubled(project, github, tmp_path, capsys):
    """The listing sees no PR, the POST is refused (422: one exists, opened since): the PR is found and updated."""
    _, dist, _ = project
    github.add_pull("pinset/bump", body="from another run")
    github.script.append({"method": "GET", "status": 200, "body": []})
    assert push(dist) == 0
    capsys.readouterr()
    assert len(github.pulls) == 1 and "<!-- pinset:" in github.pulls[0]["body"]
    assert [m for m, *_ in github.requests] == ["GET", "POST", "GET", "PATCH"]


def test_a_lost_post_answer_is_listed_again_not_posted_twice(project, github, tmp_path, sleeps, capsys):
    _, dist, _ = project
    github.script.append({"method": "POST", "status": 502, "body": {"message": "bad gateway"}, "apply": True})
    assert push(dist) == 0
    capsys.readouterr()
    assert len(github.pulls) == 1
    assert [m for m, *_ in github.requests] == ["GET", "POST", "GET"]


def test_nothing_newer_is_up_to_date(project, capsys):
    _, dist, _ = project
    assert bump(dist, "--onto", "b1") == 0
    assert "up to date" in capsys.readouterr().out and local_branch(dist) is None


@pytest.mark.parametrize("argv, message", [
    (["--repo", "o/r"], "--repo needs --push"),
    (["--push", "nowhere"], "--push nowhere: no such remote"),
    (["--branch", "a..b"], "--branch 'a..b': not a valid branch name"),
    (["--branch", "master"], "checked out in a worktree"),
    (["--push", "origin", "--repo", "not a repo"], "--repo: 'not a repo' is not OWNER/NAME"),
])
def test_bad_input_changes_nothing(project, capsys, argv, message):
    _, dist, origin = project
    before = checkout_state(dist)
    assert bump(dist, *argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert checkout_state(dist) == before and remote_branch(origin) is None


def test_no_token_for_a_pr_is_bad_input(project, monkeypatch, capsys):
    _, dist, _ = project
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    assert push(dist) == 2
    assert "needs a token in GITHUB_TOKEN, GH_TOKEN or `gh auth token`" in capsys.readouterr().err


def test_the_workflows_results_go_into_the_pr_body(project, github, tmp_path, capsys):
    """RESULTS (the nightly's sim over every build, made in the checkout) merge with the bump's own sim of BUILD."""
    _, dist, _ = project
    sim_json = tmp_path / "sim.json"
    assert main(["sim", "-c", str(dist.path / "pins.yaml"), "--json", str(sim_json)]) == 1   # b4 conflicts
    capsys.readouterr()
    assert push(dist, str(sim_json)) == 0
    capsys.readouterr()
    body = github.pulls[0]["body"]
    assert "b4" in body and "b3" in body and "range-diff of the refreshed pins" in body


def test_a_failed_pr_update_leaves_the_earlier_local_branch(project, github, tmp_path, capsys):
    """A later bump whose pull request step fails: the local branch stays at the earlier bump's commit."""
    _, dist, origin = project
    assert push(dist) == 0
    first = local_branch(dist)
    dist.commit("unrelated", {"README": "hello\n"})
    github.fail = (503, {"message": "unavailable"}, {})
    assert push(dist) == 1
    no_token_anywhere(capsys, tmp_path, dist.path, origin)
    assert local_branch(dist) == first
    assert remote_branch(origin) != first   # pushed before the API failed: the next run reuses that commit
    github.fail = None
    assert push(dist) == 0
    assert local_branch(dist) == remote_branch(origin) and "on the remote is up to date" in capsys.readouterr().out


def test_the_pr_body_and_commit_list_the_unions_pinset_made(make_repo, github, tmp_path, capsys):
    """Issue 44: a pin applied by an add/add union (pins.yaml `unions: true`) moves with the build, and the pull
    request says, before anything else, which hunks no person wrote."""
    switch = "switch (a) {\n    case 1:\n        return 1;\n    default:\n        return 0;\n}\n"
    up, b1 = first_build(make_repo, {"arch.c": switch})
    dist = make_repo("dist")
    series(up, b1, [("arch: case 7", {"arch.c": switch.replace("    default:", "    case 7:\n    default:")})],
           dist.path / "patches" / "arch")
    up.commit("arch: case 5", {"arch.c": switch.replace("    default:", "    case 5:\n    default:")})
    up.tag("b2")
    write_pins(dist.path / "pins.yaml", f"upstream: {up.path}\nbuilds: [b1, \"tags:b*:2\"]\nunions: true\npins:\n"
                                        "  - id: arch\n    patches: patches/arch\n    unchecked: test\n")
    dist.git("add", "-A")
    dist.git("commit", "-q", "-m", "the pin set")
    git(tmp_path, "init", "-q", "--bare", str(tmp_path / "origin.git"))
    dist.git("remote", "add", "origin", str(tmp_path / "origin.git"))
    assert push(dist, "--dry-run") == 0
    out = capsys.readouterr().out
    assert "**Unions pinset made itself**" in out, out
    assert "- `arch` at arch.c:5: upstream added `case 5:`, the pin `case 7:`" in out, out
    assert bump(dist) == 0
    message = git(dist.path, "log", "-1", "--format=%B", "pinset/bump")
    assert "- arch at arch.c:5: upstream added case 5:, the pin case 7:" in message, message
    # the series is refreshed with the union in it: the next night it applies exactly, by plain `git am -3` too
    assert "- arch: union -> exact (1 patches)" in message, message
    git(dist.path, "checkout", "-q", "pinset/bump")
    code, data = run_sim(tmp_path, dist.path / "pins.yaml", "--builds", "b2")
    pin = data["builds"][0]["pins"][0]
    assert code == 0 and data["builds"][0]["build"] == "b2" and pin["apply_mode"] == "exact", pin
    truth, tree = git_am_3(up.path, tmp_path / "clone", "b2", [("arch", dist.path / "patches" / "arch")])
    assert truth == {"arch": "applied"}
    assert git(tmp_path / "clone", "show", "HEAD:arch.c") == switch.replace("    default:", "    case 5:\n    case 7:\n    default:")
