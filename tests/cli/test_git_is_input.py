"""Git is an input too: what pinset says and writes does not depend on the git environment it was started in
(a hook's repository variables, a translated git, the user's gitconfig). Real git repositories, real verbs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pinset import runner
from pinset.cli import main
from tests.testing import series, without_start, write_pins

LINES = "".join(f"line {i}\n" for i in range(1, 41))


def _project(make_repo, tmp_path):
    """b1: a file; b2: five lines added above (offset); b3: a line beside the pin's changed (3-way).
    The pin is a two-commit series made on b1."""
    up = make_repo("upstream")
    b1 = up.commit("base", {"a.txt": LINES, "other.txt": "x\n"})
    up.tag("b1")
    series(up, b1, [("change line 20", {"a.txt": LINES.replace("line 20\n", "line 20 pinned\n")}),
                    ("change line 30\n\nWith a body.", {"a.txt": LINES.replace("line 20\n", "line 20 pinned\n")
                                                       .replace("line 30\n", "line 30 pinned\n")})],
           tmp_path / "project" / "patches" / "p", f"--base={b1}")
    up.commit("moved", {"a.txt": "".join(f"top {i}\n" for i in range(5)) + LINES})
    up.tag("b2")
    up.commit("beside", {"a.txt": "".join(f"top {i}\n" for i in range(5))
                          + LINES.replace("line 18\n", "line 18 upstream\n")})
    up.tag("b3")
    write_pins(tmp_path / "project" / "pins.yaml", f"""
        upstream: {up.path}
        builds: [b1, b2, b3]
        pins:
          - id: p
            patches: patches/p
            unchecked: test
        """)
    return tmp_path / "project"


def _verbs(project: Path, out: Path) -> dict:
    """sim --json, apply of b3 and refresh --write onto b3; what each said and wrote (paths made relative)."""
    pins_yaml = str(project / "pins.yaml")
    got: dict = {"sim_rc": main(["sim", "-c", pins_yaml, "--json", str(out / "sim.json")])}
    sim = out / "sim.json"
    got["sim"] = without_start(json.loads(sim.read_text().replace(str(project), "PROJECT"))) if sim.exists() else None
    got["apply_rc"] = main(["apply", "-c", pins_yaml, "--build", "b3", "--out", str(out / "tree")])
    got["tree"] = _files(out / "tree") if (out / "tree").exists() else None
    got["refresh_rc"] = main(["refresh", "p", "-c", pins_yaml, "--onto", "b3", "--write"])
    got["patches"] = _files(project / "patches")
    return got


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _modes(sim: dict | None) -> dict[str, tuple[str, str | None]] | None:
    if sim is None:
        return None
    return {b["build"]: (b["pins"][0]["status"], b["pins"][0].get("apply_mode")) for b in sim["builds"]}


def test_a_hooks_repository_variables_reach_no_git_child(make_repo, tmp_path, monkeypatch, capsys):
    """Run from a pre-commit hook, pinset inherits GIT_DIR, GIT_INDEX_FILE... of the user's repository: its
    index, objects and refs stay as they were, and the verbs say what they say anywhere else."""
    project = _project(make_repo, tmp_path)
    user = make_repo("user")
    user.commit("mine", {"mine.txt": "mine\n"})
    user.write("staged.txt", "staged\n")
    user.git("add", "staged.txt")
    before = _files(user.path)
    expected = _verbs(shutil.copytree(project, tmp_path / "clean"), (tmp_path / "out-clean"))
    git_dir = user.path / ".git"
    hook = {"GIT_DIR": str(git_dir), "GIT_INDEX_FILE": str(git_dir / "index"), "GIT_WORK_TREE": str(user.path),
            "GIT_OBJECT_DIRECTORY": str(git_dir / "objects"), "GIT_COMMON_DIR": str(git_dir),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(git_dir / "objects"), "GIT_PREFIX": "sub/",
            "GIT_NAMESPACE": "hook", "GIT_CONFIG_PARAMETERS": "'diff.context'='0' 'format.signoff'='true'",
            "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "format.coverLetter", "GIT_CONFIG_VALUE_0": "true",
            "GIT_IMPLICIT_WORK_TREE": "1", "GIT_LITERAL_PATHSPECS": "0", "GIT_ICASE_PATHSPECS": "1"}
    for key, value in hook.items():
        monkeypatch.setenv(key, value)
    got = _verbs(project, tmp_path / "out-hook")
    for key in hook:
        monkeypatch.delenv(key)
    assert _files(user.path) == before
    assert got == expected
    assert _modes(got["sim"]) == {"b1": ("applied", "exact"), "b2": ("applied", "offset"), "b3": ("applied", "3-way")}


def _german_git() -> bool:
    env = {**os.environ, "LANGUAGE": "de", "LANG": "C.UTF-8"}
    env.pop("LC_ALL", None)
    said = subprocess.run(["git", "rev-parse", "--git-dir"], cwd="/", env=env, capture_output=True, text=True)
    return "Kein Git-Repository" in said.stderr


@pytest.mark.skipif(not _german_git(), reason="no German git catalog here")
def test_a_translated_git_reads_the_same(make_repo, tmp_path, monkeypatch, capsys):
    """git's human messages (`Hunk #1 succeeded at 26 (offset 5 lines)`) are read in git's own words."""
    project = _project(make_repo, tmp_path)
    monkeypatch.setenv("LANGUAGE", "de")
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    assert main(["sim", "-c", str(project / "pins.yaml"), "--json", str(tmp_path / "sim.json")]) == 0
    assert _modes(json.loads((tmp_path / "sim.json").read_text())) == {
        "b1": ("applied", "exact"), "b2": ("applied", "offset"), "b3": ("applied", "3-way")}


def test_every_git_child_gets_cs_locale_and_no_repository_of_the_caller(monkeypatch):
    monkeypatch.setenv("LANGUAGE", "de")
    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")
    monkeypatch.setenv("GIT_DIR", "/elsewhere/.git")
    monkeypatch.setenv("GIT_CONFIG_KEY_3", "x.y")
    env = runner.child_env({"GIT_INDEX_FILE": "/mine/index"}, ["git", "apply"])
    assert env["LC_ALL"] == "C" and env["LANG"] == "C" and "LANGUAGE" not in env
    assert "GIT_DIR" not in env and env.get("GIT_CONFIG_KEY_3") != "x.y" and env["GIT_INDEX_FILE"] == "/mine/index"
    assert env["GIT_CONFIG_GLOBAL"] == os.devnull and env["GIT_CONFIG_NOSYSTEM"] == "1"
    build = runner.child_env(None, ["cmake", "--build", "."])   # other programs: no repository either
    assert "GIT_DIR" not in build and "GIT_CONFIG_KEY_3" not in build and build["LANGUAGE"] == "de"
    said = runner.run(["git", "rev-parse", "--git-dir"], cwd="/")
    assert "not a git repository" in said.stderr
    said = runner.run(["git", "config", "--list", "--show-scope"], cwd="/")
    assert said.ok and {line.split("\t")[0] for line in said.stdout.splitlines()} == {"command"}


BAD_GITCONFIG = """\
[format]
\tsignOff = true
\tcoverLetter = true
\tnumbered = true
\tsuffix = .diff
\tuseAutoBase = true
\tthread = shallow
\tsubjectPrefix = PINSET-TEST
[diff]
\tnoprefix = true
\tmnemonicPrefix = true
\tcontext = 0
\trelative = true
\trenames = copies
\talgorithm = patience
\tinterHunkContext = 10
[apply]
\tignoreWhitespace = change
\twhitespace = error-all
[am]
\tthreeWay = false
\tkeepcr = true
\tmessageId = true
[core]
\tautocrlf = true
\tquotePath = false
\tabbrev = 20
[commit]
\tgpgSign = true
[color]
\tui = always
[log]
\tshowSignature = true
\tdecorate = full
[merge]
\tconflictStyle = zdiff3
[rerere]
\tenabled = true
[i18n]
\tcommitEncoding = ISO-8859-1
\tlogOutputEncoding = ISO-8859-1
[user]
\tname = Someone Else
\temail = else@example.com
[url "https://example.invalid/"]
\tinsteadOf = kept:
"""


def test_the_users_gitconfig_changes_nothing(make_repo, tmp_path, monkeypatch, capsys):
    """A HOME whose ~/.gitconfig (and ~/.config/git/attributes) sets what changes git's output: sim, apply and
    refresh --write say and write the same as with a clean HOME."""
    project = _project(make_repo, tmp_path)
    for var in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(var, raising=False)
    clean, bad = tmp_path / "home-clean", tmp_path / "home-bad"
    clean.mkdir()
    (bad / ".config" / "git").mkdir(parents=True)
    (bad / ".gitconfig").write_text(BAD_GITCONFIG)
    (bad / ".config" / "git" / "attributes").write_text("* text eol=crlf whitespace=cr-at-eol\n")
    monkeypatch.setenv("HOME", str(clean))
    expected = _verbs(shutil.copytree(project, tmp_path / "clean"), tmp_path / "out-clean")
    assert expected["refresh_rc"] == 0 and expected["apply_rc"] == 0
    monkeypatch.setenv("HOME", str(bad))
    monkeypatch.setenv("PINSET_CACHE", str(tmp_path / "cache-bad"))
    got = _verbs(project, tmp_path / "out-bad")
    assert got == expected
    said = runner.run(["git", "config", "--get-regexp", r"^(url\..*|format\.signoff|user\.name)$"], cwd="/")
    assert said.stdout.splitlines() == ["url.https://example.invalid/.insteadof kept:", "format.signoff false"]
    assert b"Signed-off-by" not in b"".join(got["patches"].values())
