"""`pinset forecast` on trees git refuses (issue 40): a PR that adds the file `src/new` while a pin creates
`src/new/x.txt` breaks that pin, though the PR changes no file of the pin set; so does a PR that sets merge
attributes on a pin's file that needs a 3-way merge. Checked against `git am -3` on the build merged with the PR."""

from __future__ import annotations

import json
import subprocess

import pytest

import pinset.github.client as report_github
from pinset.cli import main
from tests.testing import GIT_ENV, first_build, local_only, series, write_pins
from tests.testing.fake_github import TOKEN, FakeGitHub, serving

LINES = "".join(f"line {i}\n" for i in range(1, 31))


def git(cwd, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, env={**GIT_ENV, "PATH": "/usr/bin:/bin", "HOME": str(cwd)},
                          capture_output=True, text=True, check=check)


@pytest.fixture
def fake(monkeypatch):
    fake = FakeGitHub()
    fake.pulls = [{"number": n, "title": f"PR {n}", "html_url": f"https://github.test/o/r/pull/{n}", "draft": False,
                   "updated_at": "2026-01-05T00:00:00Z", "head": {"sha": "0" * 40}, "user": {"login": "dev"}}
                  for n in (1, 2, 3)]
    monkeypatch.setattr(report_github, "_default_sleep", lambda _: None)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    local_only(monkeypatch)
    with serving(fake):
        yield fake


def test_a_pr_git_refuses_to_combine_with_a_pin_breaks_it(make_repo, tmp_path, fake):
    up, b1 = first_build(make_repo, {"src/f.c": LINES, "README": "r\n"})
    pins = tmp_path / "patches"
    series(up, b1, [("new", {"src/new/x.txt": "x\n"})], pins / "new")
    series(up, b1, [("twelve", {"src/f.c": LINES.replace("line 12\n", "twelve\n")})], pins / "twelve")
    up.commit("upstream", {"src/f.c": LINES.replace("line 10\n", "ten\n")})   # twelve needs a 3-way merge
    up.tag("b2")
    prs = {1: {"src/new": "a file\n"},                      # a file where pin `new` needs a folder
           2: {"src/.gitattributes": "f.c -merge\n"},       # no 3-way merge of f.c
           3: {"docs/more": "m\n"}}                         # nothing of the pins'
    for number, files in prs.items():
        up.git("checkout", "-q", "-b", f"pr{number}", "b2")
        up.commit(f"PR {number}", files)
        up.git("update-ref", f"refs/pull/{number}/head", "HEAD")
        up.git("checkout", "-q", "master")
    cfg = write_pins(tmp_path / "pins.yaml", f"""\
        upstream: {up.path}
        builds: [b2]
        pins:
          - id: new
            patches: {pins / 'new'}
          - id: twelve
            patches: {pins / 'twelve'}
        """)
    out = tmp_path / "forecast.json"
    code = main(["forecast", "-c", str(cfg), "--repo", "o/r", "--api-url", fake.url, "--json", str(out)])
    data = json.loads(out.read_text())
    by = {pr["number"]: pr for pr in data["prs"]}
    assert code == 1, data
    assert {p["id"]: p["effect"] for p in by[1]["pins"]} == {"new": "breaks"}, by[1]
    assert by[1]["touches"] == ["src/new"]
    assert {p["id"]: p["effect"] for p in by[2]["pins"]} == {"twelve": "breaks"}, by[2]
    assert by[3]["touches"] == [] and by[3]["merges"] is None
    # git am -3 on the build merged with each PR: the same pins fail
    for number, failing in ((1, "new"), (2, "twelve")):
        where = tmp_path / f"plain-{number}"
        git(up.path, "worktree", "add", "-q", "--detach", str(where), "b2")
        git(where, "merge", "-q", "--no-edit", f"refs/pull/{number}/head")
        for pin in ("new", "twelve"):
            am = git(where, "am", "-q", "-3", *sorted(str(p) for p in (pins / pin).glob("*.patch")), check=False)
            assert (am.returncode != 0) == (pin == failing), (number, pin, am.stderr)
            if am.returncode:
                git(where, "am", "--abort")
