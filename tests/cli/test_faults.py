"""Faults lose nothing and leave nothing: killed runs, concurrent runs, damaged caches.

Real pinset processes (python -m pinset) on real git repositories; fake programs (a `git` that
hangs in one sub-command) only to hold a run still at the moment we kill it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pinset import runner
from pinset.store import clean_scratch, scratch_dir
from tests.testing import child_env, without_start, write_pins
from tests.testing.fake_pypi import FakeIndex, make_sdist, note_patch, serve
from tests.testing.processes import alive, wait_for

MMQ = "bool use_mmq(int type) {\n    switch (type) {\n        case 2:\n            return true;\n        default:\n            return false;\n    }\n}\n"
README = "llama.cpp\n"


@pytest.fixture
def world(make_repo, tmp_path, monkeypatch):
    """An upstream with tags b1/b2 and a PR ref, a patch pin, a PR pin, a pypi build on a fake index."""
    up = make_repo("upstream")
    b1 = up.commit("base", {"src/mmq.cu": MMQ, "README.md": README})
    up.tag("b1")
    up.git("checkout", "-q", "-b", "pr", b1)
    pr_head = up.commit("pr", {"src/iq1m.cu": "int iq1m(void) { return 3; }\n"})
    up.git("update-ref", "refs/pull/42/head", pr_head)
    up.git("checkout", "-q", "master")
    up.commit("later", {"src/late.c": "int late(void) { return 2; }\n"})
    up.tag("b2")
    note_patch(tmp_path)
    index = FakeIndex()
    index.add("llama-cpp-python", "9.9.9", make_sdist("9.9.9", {"src/mmq.cu": MMQ, "README.md": README}, padding=300_000))
    server = serve(index)
    monkeypatch.setenv("PINSET_PYPI_URL", index.url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    cfg = write_pins(tmp_path / "pins.yaml", f"""
        upstream: {up.path}
        builds: [b1, b2, pypi:llama-cpp-python==9.9.9]
        pins:
          - id: note
            patches: patches/note
          - id: ggml-org#42
            pr: https://github.com/ggml-org/llama.cpp/pull/42
            commit: {pr_head}
    """)
    yield up, cfg, index
    server.shutdown()


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """TMPDIR of every pinset process we start: it must stay empty, whatever happens to the run."""
    path = tmp_path / "private-tmp"
    path.mkdir()
    monkeypatch.setenv("TMPDIR", str(path))
    return path


def pinset_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "pinset", *args]


def sim_json(cfg: Path, out: Path, cache: Path) -> tuple[int, dict | None, str]:
    done = subprocess.run(pinset_argv("sim", "-c", str(cfg), "--json", str(out), "--cache", str(cache)),
                          env=child_env(), capture_output=True, text=True, timeout=300)
    return done.returncode, without_start(json.loads(out.read_text())) if out.exists() else None, done.stderr


def hanging_git(folder: Path, subcommand: str) -> dict[str, str]:
    """A `git` first on PATH that runs the real one, except that in `subcommand` it records its pid,
    starts a grandchild, says it got there, and then hangs."""
    folder.mkdir(parents=True, exist_ok=True)
    real = shutil.which("git")
    script = folder / "git"
    script.write_text(f"""#!/bin/sh
case " $* " in
  *" {subcommand} "*)
    echo $$ > "{folder}/child.pid"
    "{real}" "$@" || exit $?
    sleep 300 &
    echo $! > "{folder}/grandchild.pid"
    touch "{folder}/reached"
    wait
    exit 0;;
esac
exec "{real}" "$@"
""")
    script.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def pids(folder: Path) -> list[int]:
    return [int((folder / f"{name}.pid").read_text()) for name in ("child", "grandchild")]


# --- concurrent runs ------------------------------------------------------------------------

def test_concurrent_runs_on_a_fresh_cache_agree(world, tmp_path, private_tmp):
    _, cfg, _ = world
    cache = tmp_path / "fresh-cache"
    n = 8
    procs = [subprocess.Popen(pinset_argv("sim", "-c", str(cfg), "--json", str(tmp_path / f"sim-{i}.json"),
                                          "--cache", str(cache)),
                              env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for i in range(n)]
    results = [(p.communicate(timeout=600)[1], p.returncode)[::-1] for p in procs]
    codes = [code for code, _ in results]
    assert codes == [0] * n, results
    docs = [without_start(json.loads((tmp_path / f"sim-{i}.json").read_text())) for i in range(n)]
    assert all(doc == docs[0] for doc in docs)
    statuses = {b["build"]: [p["status"] for p in b["pins"]] for b in docs[0]["builds"]}
    assert statuses == {"b1": ["applied", "applied"], "b2": ["applied", "applied"],
                        "pypi:llama-cpp-python==9.9.9": ["applied", "applied"]}
    assert len(world[2].file_requests()) == 1  # one process downloaded, the others waited
    assert list(private_tmp.iterdir()) == []
    assert list((cache / "tmp").iterdir()) == []  # every run's scratch space is gone


# --- killed runs ----------------------------------------------------------------------------

def test_sigkilled_apply_leaves_no_tree_and_no_process(world, tmp_path, private_tmp):
    _, cfg, _ = world
    cache, out, fake = tmp_path / "cache", tmp_path / "tree", tmp_path / "fake"
    proc = subprocess.Popen(pinset_argv("apply", "-c", str(cfg), "--build", "b1", "--out", str(out), "--cache", str(cache)),
                            env=child_env(**hanging_git(fake, "checkout-index")),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: (fake / "reached").exists() or proc.poll() is not None, what="apply writing its tree")
    assert proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    child, grandchild = pids(fake)
    wait_for(lambda: not alive(child) and not alive(grandchild), seconds=10, what="the children to die")
    assert not out.exists()  # half a tree is never at --out
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".tree.pinset-tmp-")]
    assert len(leftovers) == 1
    assert list(private_tmp.iterdir()) == []

    again = subprocess.run(pinset_argv("apply", "-c", str(cfg), "--build", "b1", "--out", str(out), "--cache", str(cache)),
                           env=child_env(), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert (out / "README.md").read_text() == README + "The pinned build carries a note.\n"
    assert (out / "src" / "iq1m.cu").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tree.pinset-tmp-")]
    assert list(private_tmp.iterdir()) == []


def test_interrupted_apply_cleans_up_and_exits_130(world, tmp_path, private_tmp):
    _, cfg, _ = world
    out, fake = tmp_path / "tree", tmp_path / "fake"
    proc = subprocess.Popen(pinset_argv("apply", "-c", str(cfg), "--build", "b1", "--out", str(out)),
                            env=child_env(**hanging_git(fake, "checkout-index")),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: (fake / "reached").exists() or proc.poll() is not None, what="apply writing its tree")
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    assert proc.wait(timeout=60) == 130
    assert proc.stderr.read().strip().splitlines() == ["pinset: interrupted"]
    proc.stderr.close()
    child, grandchild = pids(fake)
    assert not alive(child) and not alive(grandchild)  # killed before pinset returned
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tree.pinset-tmp-")]
    assert list(private_tmp.iterdir()) == []


def test_sigkilled_sim_takes_its_fetch_with_it(world, tmp_path, private_tmp):
    _, cfg, _ = world
    cache, fake = tmp_path / "cache", tmp_path / "fake"
    proc = subprocess.Popen(pinset_argv("sim", "-c", str(cfg), "--cache", str(cache)),
                            env=child_env(**hanging_git(fake, "fetch")),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: (fake / "reached").exists() or proc.poll() is not None, what="sim fetching")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    child, grandchild = pids(fake)
    wait_for(lambda: not alive(child) and not alive(grandchild), seconds=10, what="the children to die")
    assert list(private_tmp.iterdir()) == []
    code, data, err = sim_json(cfg, tmp_path / "sim.json", cache)  # the next run is not blocked
    assert code == 0 and data["ok"], err
    assert list((cache / "tmp").iterdir()) == []  # and it removed the killed run's scratch folder


def test_required_pin_failure_writes_no_tree(world, tmp_path, capsys):
    up, cfg, _ = world
    (tmp_path / "patches" / "broken").mkdir()
    (tmp_path / "patches" / "broken" / "0001-b.patch").write_text(
        "diff --git a/src/mmq.cu b/src/mmq.cu\n--- a/src/mmq.cu\n+++ b/src/mmq.cu\n@@ -1 +1 @@\n-nothing like this\n+x\n")
    cfg.write_text(cfg.read_text() + "  - id: broken\n    patches: patches/broken\n")
    from pinset.cli import main

    out = tmp_path / "tree"
    assert main(["apply", "-c", str(cfg), "--build", "b1", "--out", str(out)]) == 1
    assert not out.exists()
    assert "required pins failed on b1: broken" in " ".join(capsys.readouterr().out.split())
    assert main(["apply", "-c", str(cfg), "--build", "b1", "--out", str(out), "--bare"]) == 0
    assert (out / "README.md").read_text() == README


# --- the runner -----------------------------------------------------------------------------

def test_timeout_kills_the_whole_group(tmp_path):
    pid_file = tmp_path / "bg.pid"
    done = runner.run(["sh", "-c", f"sleep 300 & echo $! > {pid_file}; wait"], timeout=1)
    assert done.timed_out
    bg = int(pid_file.read_text())
    wait_for(lambda: not alive(bg), seconds=5, what="the grandchild to die")


def test_background_child_does_not_outlive_its_program(tmp_path):
    pid_file = tmp_path / "bg.pid"
    done = runner.run(["sh", "-c", f"sleep 300 >/dev/null 2>&1 & echo $! > {pid_file}"], timeout=60)
    assert done.ok
    bg = int(pid_file.read_text())
    wait_for(lambda: not alive(bg), seconds=5, what="the background child to die")


@pytest.mark.parametrize("run", [runner.run, runner.run_streaming])
def test_exception_while_waiting_kills_the_group(tmp_path, run):
    """An exception in pinset (Ctrl-C, a bug) while a program runs: its whole group goes."""
    pid_file = tmp_path / "bg.pid"

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with pytest.raises(KeyboardInterrupt):
            run(["sh", "-c", f"sleep 300 & echo $! > {pid_file}; wait"], timeout=120)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    bg = int(pid_file.read_text())
    wait_for(lambda: not alive(bg), seconds=5, what="the grandchild to die")


# --- scratch space --------------------------------------------------------------------------

def test_scratch_of_dead_runs_is_removed_live_ones_are_kept(tmp_path):
    parent = tmp_path / "tmp"
    dead = parent / "mirror-99999-dead"
    (dead / "sub").mkdir(parents=True)
    (dead / "sub" / "index").write_text("x")
    with scratch_dir(parent, "sdist-") as live:
        (live / "index").write_text("y")
        assert clean_scratch(parent) == [dead]
        assert (live / "index").read_text() == "y"
    assert list(parent.iterdir()) == []


def test_scratch_held_by_another_process_survives(tmp_path):
    parent = tmp_path / "tmp"
    held = parent / "sdist-1-held"
    held.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               f"fd = os.open({str(held)!r}, os.O_RDONLY)\nfcntl.flock(fd, fcntl.LOCK_EX)\n"
                               "print('held', flush=True)\ntime.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert clean_scratch(parent) == [] and held.is_dir()
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert clean_scratch(parent) == [held] and not held.exists()


# --- damaged caches -------------------------------------------------------------------------

@pytest.fixture
def warm(world, tmp_path):
    """A cache after one good run, and that run's JSON."""
    _, cfg, _ = world
    cache = tmp_path / "cache"
    code, data, err = sim_json(cfg, tmp_path / "first.json", cache)
    assert code == 0, err
    return cfg, cache, data


def test_emptied_or_truncated_pr_diff_is_rebuilt(warm, tmp_path):
    cfg, cache, first = warm
    (diff,) = (cache / "pins").glob("*.diff")
    for damage in (b"", diff.read_bytes()[: diff.stat().st_size // 2]):
        diff.write_bytes(damage)
        code, data, err = sim_json(cfg, tmp_path / "again.json", cache)
        assert code == 0 and data == first, err


def test_truncated_mirror_head_is_repaired(warm, tmp_path):
    cfg, cache, first = warm
    (cache / "mirror.git" / "HEAD").write_text("ref: refs/he")
    code, data, err = sim_json(cfg, tmp_path / "again.json", cache)
    assert code == 0 and data == first, err


def test_broken_ref_is_fetched_again(warm, tmp_path):
    cfg, cache, first = warm
    ref = cache / "mirror.git" / "refs" / "pinset" / "upstream" / "tags" / "b1"
    ref.write_text(ref.read_text()[:10])
    code, data, err = sim_json(cfg, tmp_path / "again.json", cache)
    assert code == 0 and data == first, err


def _loose_object(cache: Path, up, rev: str) -> Path:
    oid = up.git("rev-parse", rev).strip()
    path = cache / "mirror.git" / "objects" / oid[:2] / oid[2:]
    assert path.exists(), "expected a loose object in a small fetched mirror"
    return path


@pytest.mark.parametrize("damage", ["lost", "emptied"])
def test_damaged_mirror_objects_are_named_in_one_line(world, warm, tmp_path, damage):
    up, _, _ = world
    cfg, cache, _ = warm
    blob = _loose_object(cache, up, "b1:src/mmq.cu")
    if damage == "lost":
        blob.unlink()
    else:
        blob.chmod(0o644)
        blob.write_bytes(b"")
    code, data, err = sim_json(cfg, tmp_path / "again.json", cache)
    lines = err.strip().splitlines()
    assert code == 1 and data is None
    assert len(lines) == 1 and lines[0].startswith(f"pinset sim: error: cache damaged: {cache / 'mirror.git'} ("), lines
    assert lines[0].endswith("; remove it and run again")


def test_reading_a_lost_blob_is_damage_not_a_missing_file(world, warm):
    from pinset.errors import CacheDamaged
    from pinset.upstream.mirror import Mirror

    up, _, _ = world
    _, cache, _ = warm
    tree = up.git("rev-parse", "b1^{tree}").strip()
    _loose_object(cache, up, "b1:README.md").unlink()
    with Mirror(cache / "mirror.git") as mirror:
        assert mirror.read_blob(tree, "no/such/file") is None
        with pytest.raises(CacheDamaged, match=r"cache damaged: .*mirror\.git \(object [0-9a-f]{12} \(README\.md\) is missing\)"):
            mirror.read_blob(tree, "README.md")


def test_ref_locks_left_by_a_killed_git_do_not_block(world, warm, tmp_path):
    """A git killed mid-fetch leaves `<ref>.lock` files; the next run must not trip over them."""
    cfg, cache, first = warm
    mirror = cache / "mirror.git"
    ref = mirror / "refs" / "pinset" / "upstream" / "tags" / "b1"
    ref.unlink()  # so b1 is fetched again, through its stale lock
    ref.with_name("b1.lock").write_text("")
    (mirror / "packed-refs.lock").write_text("")
    code, data, err = sim_json(cfg, tmp_path / "again.json", cache)
    assert code == 0 and data == first, err
    assert not ref.with_name("b1.lock").exists() and not (mirror / "packed-refs.lock").exists()


@pytest.mark.parametrize("function", ["run", "run_streaming"])
def test_sigkilled_caller_takes_program_and_grandchild_along(tmp_path, private_tmp, function):
    """PDEATHSIG ends the program; the lifeline ends what the program started (its group)."""
    folder = tmp_path / "pids"
    folder.mkdir()
    program = f"echo $$ > {folder}/child.pid; sleep 300 & echo $! > {folder}/grandchild.pid; wait"
    caller = subprocess.Popen([sys.executable, "-c", f"from pinset import runner\n"
                               f"runner.{function}(['sh', '-c', {program!r}], timeout=600)"], env=child_env())
    wait_for(lambda: (folder / "grandchild.pid").exists() and (folder / "child.pid").exists()
             or caller.poll() is not None, what="the program to start")
    time.sleep(0.2)
    caller.send_signal(signal.SIGKILL)
    caller.wait()
    child, grandchild = pids(folder)
    wait_for(lambda: not alive(child) and not alive(grandchild), seconds=10, what="the program and its child to die")
    assert list(private_tmp.iterdir()) == []
