"""A full disk under the cache or --out is exit 1 naming the path, never "no such tag" (exit 2) or a traceback.

Two ways in: a real 1 MiB tmpfs (needs root to mount; CI containers run as root), and a git on PATH that
answers a fetch with git's own ENOSPC words (captured from git 2.39 on a full tmpfs), which runs anywhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from pinset.cli import main
from pinset.disk import disk_refusal
from tests.testing import ROOT, one_pin_project

# What git 2.39 printed for `git fetch` into a mirror on a full 1 MiB tmpfs.
GIT_ENOSPC = "fatal: unable to write loose object file: No space left on device\nfatal: unpack-objects failed\n"


@pytest.fixture
def project(tmp_path, make_repo, monkeypatch):
    up = make_repo()
    up.write("big.bin", "")
    (up.path / "big.bin").write_bytes(os.urandom(3_000_000))  # does not fit in 1 MiB
    up.commit("base", {"a.txt": "one\ntwo\nthree\n"})
    up.git("add", "big.bin")
    up.commit("big")
    up.tag("b1")
    one_pin_project(tmp_path, up)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def tiny_disk(tmp_path):
    where = tmp_path / "tiny"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)], capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.decode().strip()}); the fake-git test covers it")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def test_git_words_for_a_full_disk_are_recognised():
    assert disk_refusal(GIT_ENOSPC) == "fatal: unable to write loose object file: No space left on device"
    assert disk_refusal("fatal: unable to write new index file\n")
    assert disk_refusal("error: patch failed: a.txt:1\nerror: a.txt: patch does not apply\n") is None
    assert disk_refusal("remote: fatal: No space left on device\n") is None  # the server's disk, not ours


def test_a_full_cache_disk_is_exit_1_naming_it(project, tiny_disk, monkeypatch, capsys):
    monkeypatch.setenv("PINSET_CACHE", str(tiny_disk / "cache"))
    assert main(["sim"]) == 1
    err = capsys.readouterr().err
    assert "no such tag" not in err and err.count("\n") == 1, err
    assert f"{tiny_disk / 'cache'}" in err and "No space left on device" in err


def test_a_full_out_disk_is_exit_1_naming_it(project, tiny_disk, capsys):
    assert main(["apply", "--build", "b1", "--bare", "--out", str(tiny_disk / "tree")]) == 1
    err = capsys.readouterr().err
    assert str(tiny_disk) in err and err.count("\n") == 1, err
    assert "refused a write" in err and not (tiny_disk / "tree").exists()


def test_a_fetch_that_finds_the_disk_full_is_not_no_such_tag(project, tmp_path):
    """A git on PATH that says what git says on a full disk, for fetches; every other git call is real."""
    fake = tmp_path / "fakebin"
    fake.mkdir()
    real = shutil.which("git")
    (fake / "git").write_text(f"#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = fetch ] && "
                              f"{{ printf '%s' '{GIT_ENOSPC}' >&2; exit 128; }}; done\nexec {real} \"$@\"\n")
    (fake / "git").chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "pinset", "sim"], cwd=project, env=env, capture_output=True, text=True,
                       timeout=120, check=False)
    assert r.returncode == 1, r.stderr
    assert "no such tag" not in r.stderr and "mirror.git" in r.stderr and "No space left on device" in r.stderr
