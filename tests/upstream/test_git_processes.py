"""Speed without losing a guarantee: git without PDEATHSIG still dies with pinset, one object reader
per run, the moved-code index stored by tree id.

Real git repositories; a `git` wrapper first on PATH only counts calls or holds a program still.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pinset import runner
from pinset.sim import moved
from pinset.sim.moved import TreeLines
from pinset.upstream.mirror import Mirror
from tests.testing import child_env
from tests.testing.processes import alive, wait_for


def wrapper_git(folder: Path, body: str) -> dict[str, str]:
    """A `git` first on PATH: runs `body` (sh), then the real git."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "git"
    script.write_text(f"#!/bin/sh\n{body}\nexec \"{shutil.which('git')}\" \"$@\"\n")
    script.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def reopened(mirror: Mirror, folder: Path, body: str, monkeypatch) -> Mirror:
    """`mirror` closed and opened again under a wrapper_git(folder, body): the git processes it starts run `body`."""
    mirror.close()
    for k, v in wrapper_git(folder, body).items():
        monkeypatch.setenv(k, v)
    return Mirror(mirror.path)


@pytest.fixture
def mirrored(make_repo, tmp_path):
    """A mirror holding a small upstream commit; (mirror, tree id, commit id)."""
    up = make_repo("upstream")
    files = {"README.md": "llama.cpp\n", "src/a.c": "int a(void) { return 1; }\nstatic int shared_line = 1;\n",
             "src/deep/b.c": "static int shared_line = 1;\nint b(void) { return 2; }\n"}
    commit = up.commit("base", files)
    (up.path / "crlf.txt").write_bytes(b"one\r\ntwo\rthree\n\xff\xfe bad utf-8\n")
    up.git("add", "crlf.txt")
    commit = up.commit("crlf")
    mirror = Mirror(tmp_path / "cache" / "mirror.git")
    assert mirror.fetch(str(up.path), [f"{commit}:refs/test/base"]).ok
    yield mirror, mirror.tree_of(commit), commit
    mirror.close()


# --- the runner: git is started without preexec_fn, still tied to pinset's life -------------------

def test_git_is_started_without_preexec_fn_and_others_with_it(monkeypatch):
    runner.git_env()   # the user's kept settings, read once (a local git of its own)
    seen = []
    real_popen = subprocess.Popen

    def popen(args, **kw):
        seen.append((os.path.basename(args[0]), kw.get("preexec_fn") is not None, bool(kw.get("start_new_session"))))
        return real_popen(args, **kw)

    monkeypatch.setattr(runner.subprocess, "Popen", popen)
    assert runner.run(["git", "--version"]).ok
    assert runner.run(["sh", "-c", "exit 0"]).ok
    runner.run(["git", "ls-remote", "/nonexistent"])
    linux = sys.platform.startswith("linux")
    seen = [entry for entry in seen if entry[0] != os.path.basename(sys.executable)]  # the lifeline
    # local git: no preexec_fn, pinset's own session (scheduler autogroup) where Python has process_group
    assert seen[0] == ("git", False, sys.version_info < (3, 11))
    assert seen[1] == ("sh", linux, True)
    assert seen[2] == ("git", linux, True)  # network git keeps its own session (no tty prompt stops it)


def test_sigkilled_caller_takes_git_and_its_child_along(tmp_path):
    """git has no PDEATHSIG: the lifeline alone must end it and what it started."""
    folder = tmp_path / "fake"
    env = wrapper_git(folder, f'echo $$ > "{folder}/child.pid"\nsleep 300 &\necho $! > "{folder}/grandchild.pid"\nwait')
    caller = subprocess.Popen([sys.executable, "-c", "from pinset import runner\nrunner.run(['git', '--version'], timeout=600)"],
                              env=child_env(**env))
    wait_for(lambda: (folder / "grandchild.pid").exists() or caller.poll() is not None, what="the fake git to start")
    time.sleep(0.2)
    assert caller.poll() is None
    caller.send_signal(signal.SIGKILL)
    caller.wait()
    child, grandchild = (int((folder / f"{n}.pid").read_text()) for n in ("child", "grandchild"))
    wait_for(lambda: not alive(child) and not alive(grandchild), what="git and its child to die")


def test_object_reader_dies_with_sigkilled_caller(mirrored, tmp_path):
    mirror, tree, _ = mirrored
    pid_file = tmp_path / "reader.pid"
    code = (f"from pathlib import Path\nfrom pinset.upstream.mirror import Mirror\nimport time\n"
            f"m = Mirror(Path({str(mirror.path)!r}))\nassert m.read_blob({tree!r}, 'README.md')\n"
            f"Path({str(pid_file)!r}).write_text(str(m._reader._session.proc.pid))\ntime.sleep(300)\n")
    caller = subprocess.Popen([sys.executable, "-c", code], env=child_env())
    wait_for(lambda: pid_file.exists() and pid_file.read_text() or caller.poll() is not None, what="the reader to start")
    assert caller.poll() is None
    reader = int(pid_file.read_text())
    assert alive(reader)
    caller.send_signal(signal.SIGKILL)
    caller.wait()
    wait_for(lambda: not alive(reader), what="the reader to die")


def test_object_reader_gets_the_scrubbed_environment(mirrored, tmp_path, monkeypatch):
    mirror, tree, _ = mirrored
    folder = tmp_path / "envgit"
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret_for_test")
    with reopened(mirror, folder, f'env >> "{folder}/env.txt"', monkeypatch) as again:
        assert again.read_blob(tree, "README.md") == "llama.cpp\n"
    seen = (folder / "env.txt").read_text()
    assert "PATH=" in seen and "ghp_secret_for_test" not in seen


# --- one object reader per run -----------------------------------------------------------------

def test_blob_reads_share_one_git_process(mirrored, tmp_path, monkeypatch):
    mirror, tree, commit = mirrored
    folder = tmp_path / "countgit"
    with reopened(mirror, folder, f'echo "$*" >> "{folder}/calls.txt"', monkeypatch) as again:
        for _ in range(20):
            assert again.read_blob(tree, "src/a.c").startswith("int a(void)")
            assert again.read_blob(tree, "src/none.c") is None
        assert again.read_objects([tree, "0" * 40]).keys() == {tree}
    calls = [c for c in (folder / "calls.txt").read_text().splitlines()
             if c != "config --list --show-scope --includes -z"]   # the runner's one read of the kept settings
    # One reader, besides the mirror's own check of its refs (for-each-ref, cat-file --batch-check).
    assert sum(c.endswith("cat-file --batch") for c in calls) == 1 and len(calls) <= 3, calls


def test_read_blob_gives_what_git_cat_file_gave(mirrored):
    """Same text as one `git cat-file blob` in text mode (universal newlines, UTF-8 with replacements),
    None for absent paths and folders."""
    mirror, tree, commit = mirrored
    for rev in (tree, commit):
        for path in ("README.md", "crlf.txt", "src/deep/b.c"):
            alone = runner.run(["git", "--git-dir", str(mirror.path), "cat-file", "blob", f"{rev}:{path}"])
            assert alone.ok and mirror.read_blob(rev, path) == alone.stdout
        for path in ("src", "src/deep", "nothing", "src/nothing.c", "nothing/at/all.c", "README.md/x"):
            assert mirror.read_blob(rev, path) is None, path
    assert mirror.read_blob(tree, "crlf.txt").startswith("one\ntwo\nthree\n")


# --- the moved-code index, stored by tree id ------------------------------------------------------

def test_moved_index_is_stored_and_a_later_run_reads_no_tree(mirrored, monkeypatch):
    mirror, tree, _ = mirrored
    needles = {"static int shared_line = 1;", "int b(void) { return 2; }"}
    first = TreeLines(mirror, needles).locations(tree)
    assert first == {"static int shared_line = 1;": {"src/a.c": 1, "src/deep/b.c": 1},
                     "int b(void) { return 2; }": {"src/deep/b.c": 1}}
    stored = list((mirror.cache / "moved").glob(f"{tree}-*.json"))
    assert len(stored) == 1

    def no_reads(self, tree):
        raise AssertionError("the tree was read again")

    monkeypatch.setattr(TreeLines, "_read_new_blobs", no_reads)
    assert TreeLines(mirror, set(needles)).locations(tree) == first
    with pytest.raises(AssertionError, match="read again"):  # other needles: another index
        TreeLines(mirror, {"int a(void) { return 1; }"}).locations(tree)


@pytest.mark.parametrize("damage", [b"", b'{"static int', b"[1, 2]", b'{"x": 3}'])
def test_damaged_stored_index_is_computed_again(mirrored, damage):
    mirror, tree, _ = mirrored
    needles = {"static int shared_line = 1;"}
    first = TreeLines(mirror, needles).locations(tree)
    (stored,) = (mirror.cache / "moved").glob(f"{tree}-*.json")
    stored.write_bytes(damage)  # its digest marker no longer agrees
    assert TreeLines(mirror, needles).locations(tree) == first
    assert moved.read_checked(stored) is not None  # and it was written whole again
