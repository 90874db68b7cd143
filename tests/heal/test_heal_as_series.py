"""`pinset rebase OWNER#N --as-series patches/NAME`: a PR pin becomes a local series, pins.yaml edited in place."""

from __future__ import annotations

import json

from pinset.cli import main


def make_pr(make_repo, merges=False):
    up = make_repo("upstream")
    up.commit("base", {"a.c": "int a(void) { return 1; }\n", "b.c": "int b;\n"})
    fork = up.head()
    up.commit("upstream moves", {"b.c": "int b;\nint b2;\n"})
    mid = up.head()
    up.git("checkout", "-q", "-b", "pr", fork)
    up.commit("pr: first", {"a.c": "int a(void) { return 2; }\n"})
    if merges:
        up.git("merge", "-q", "--no-edit", mid)
    head = up.commit("pr: second", {"c.c": "int c(void) { return 3; }\n"})
    up.git("update-ref", "refs/pull/7/head", head)
    up.git("checkout", "-q", "master")
    up.tag("b1")
    return up, head


PINS = """\
# my pin set
upstream: {up}
builds: [b1]   # one build
pins:
  - id: first
    patches: patches/first
    unchecked: none
  - id: ggml-org#7          # the PR we carry
    pr: https://github.com/ggml-org/llama.cpp/pull/7   # reviewed
    commit: {head}   # exact commit
    required: false
    unchecked: "no GPU feature"
"""


def setup(tmp_path, make_repo, merges=False):
    up, head = make_pr(make_repo, merges)
    (tmp_path / "patches" / "first").mkdir(parents=True)
    up.git("checkout", "-q", "-b", "s", "b1")
    up.commit("first", {"d.c": "int d;\n"})
    up.git("format-patch", "-q", "-o", str(tmp_path / "patches" / "first"), "b1..s")
    up.git("checkout", "-q", "master")
    cfg = tmp_path / "pins.yaml"
    cfg.write_text(PINS.format(up=up.path, head=head))
    return up, head, cfg


def test_pr_pin_becomes_a_series_pin_keeping_the_users_file(make_repo, tmp_path, capsys):
    up, head, cfg = setup(tmp_path, make_repo)
    sim = tmp_path / "before.json"
    main(["sim", "-c", str(cfg), "--json", str(sim)])
    assert main(["rebase", "ggml-org#7", "-c", str(cfg), "--as-series", "patches/pr7"]) == 0
    text = cfg.read_text()
    expected = PINS.format(up=up.path, head=head).replace(
        "    pr: https://github.com/ggml-org/llama.cpp/pull/7   # reviewed\n    commit: " + head + "   # exact commit\n",
        f"    patches: patches/pr7   # was https://github.com/ggml-org/llama.cpp/pull/7 at {head} "
        f"(pinset rebase --as-series; base: its fork point ")
    assert text.startswith(expected.split("(pinset rebase")[0])
    assert "# my pin set" in text and "# one build" in text and "# the PR we carry" in text
    assert "commit:" not in text and "    # exact commit\n" in text and "required: false" in text
    files = sorted(p.name for p in (tmp_path / "patches" / "pr7").iterdir())
    assert files == ["0001-pr-first.patch", "0002-pr-second.patch"]
    after = tmp_path / "after.json"
    assert main(["sim", "-c", str(cfg), "--json", str(after)]) == 0
    pins = {p["id"]: p for p in json.loads(after.read_text())["builds"][0]["pins"]}
    assert pins["ggml-org#7"]["status"] == "applied"
    assert pins["ggml-org#7"]["touched"] == json.loads(sim.read_text())["builds"][0]["pins"][1]["touched"]


def test_pr_with_merges_becomes_one_patch_of_its_diff(make_repo, tmp_path, capsys):
    _, _, cfg = setup(tmp_path, make_repo, merges=True)
    assert main(["rebase", "ggml-org#7", "-c", str(cfg), "--as-series", "patches/pr7"]) == 0
    files = sorted((tmp_path / "patches" / "pr7").iterdir())
    assert len(files) == 1 and "int b2;" not in files[0].read_text()   # not upstream's history it merged


def test_as_series_refuses_a_series_pin_and_a_used_folder(make_repo, tmp_path, capsys):
    _, _, cfg = setup(tmp_path, make_repo)
    before = cfg.read_bytes()
    assert main(["rebase", "first", "-c", str(cfg), "--as-series", "patches/x"]) == 2
    assert main(["rebase", "ggml-org#7", "-c", str(cfg), "--as-series", "patches/first"]) == 2
    assert "not an empty folder" in capsys.readouterr().err
    assert cfg.read_bytes() == before


def test_a_fork_pr_pin_becomes_a_series_fetched_from_the_fork(make_repo, tmp_path, capsys):
    """Trust III: a `repo:` pin (a PR from a fork, its commits not in upstream) failed naming a temporary file and
    left an empty folder. It is fetched from the fork as sim does; a failure leaves nothing behind."""
    import subprocess

    up = make_repo("upstream")
    up.commit("base", {"a.c": "int a(void) { return 1; }\n"})
    up.tag("b1")
    fork = tmp_path / "fork"
    subprocess.run(["git", "clone", "-q", str(up.path), str(fork)], check=True)
    import os

    from tests.testing import GIT_ENV
    env = dict(os.environ, **GIT_ENV)
    (fork / "a.c").write_text("int a(void) { return 2; }\n")
    subprocess.run(["git", "-C", str(fork), "commit", "-qam", "pr: from a fork"], check=True, env=env)
    head = subprocess.run(["git", "-C", str(fork), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    cfg = tmp_path / "pins.yaml"
    cfg.write_text(f"upstream: {up.path}\nbuilds: [b1]\npins:\n  - id: ggml-org#9\n"
                   f"    pr: https://github.com/ggml-org/llama.cpp/pull/9\n    commit: {head}\n"
                   f"    repo: {fork}\n    unchecked: none\n")
    before = cfg.read_text()
    assert main(["rebase", "ggml-org#9", "-c", str(cfg), "--as-series", "patches/nine"]) == 0, capsys.readouterr()
    assert "patches: patches/nine" in cfg.read_text() and f"repo: {fork}" not in cfg.read_text().split("# was")[0]
    [patch] = sorted((tmp_path / "patches" / "nine").glob("*.patch"))
    assert "pr: from a fork" in patch.read_text()
    # a fork that is gone: bad input, nothing left behind (no folder, pins.yaml as it was)
    cfg.write_text(before.replace(str(fork), str(tmp_path / "gone")).replace(head, "1" * 40))
    kept = cfg.read_text()
    assert main(["rebase", "ggml-org#9", "-c", str(cfg), "--as-series", "patches/ten"]) in (1, 2)
    assert not (tmp_path / "patches" / "ten").exists() and cfg.read_text() == kept
    assert not [p for p in (tmp_path / "patches").iterdir() if p.name.startswith(".")]


KILLER = """
import os, signal, sys, runpy
import pinset.store as store
from pathlib import Path
where = sys.argv.pop(1)
real_rename, real_write = os.rename, store.atomic_write
def rename(a, b, *rest, **kw):
    if where == "rename" and Path(b).name == "pr7":
        os.kill(os.getpid(), signal.SIGKILL)
    return real_rename(a, b, *rest, **kw)
def atomic_write(path, data, *rest, **kw):
    if where == "yaml" and Path(path).name == "pins.yaml":
        os.kill(os.getpid(), signal.SIGKILL)
    return real_write(path, data, *rest, **kw)
os.rename = rename
store.atomic_write = atomic_write
import pinset.heal.as_series as as_series
as_series.atomic_write = atomic_write
sys.argv[0] = "pinset"
runpy.run_module("pinset", run_name="__main__")
"""


def _killed_run(tmp_path, cfg, where):
    """`pinset rebase --as-series` in a child killed (SIGKILL: no cleanup runs) at `where`."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", KILLER, where, "rebase", "ggml-org#7", "-c", str(cfg),
                           "--as-series", "patches/pr7"], env=env, capture_output=True, text=True)
    assert done.returncode == -9, (done.returncode, done.stderr)


def test_a_run_killed_before_the_folder_goes_in_leaves_what_the_next_run_removes(make_repo, tmp_path, capsys):
    """Trust III: the series was staged as `.pr7.pinset-new`, a name no recovery knows: a run killed there left it
    beside the user's folders until the same command ran again. Staged under the journal's names, the next run
    of any verb removes it."""
    up, head, cfg = setup(tmp_path, make_repo)
    before = cfg.read_bytes()
    _killed_run(tmp_path, cfg, "rename")
    assert cfg.read_bytes() == before and not (tmp_path / "patches" / "pr7").exists()
    assert [p.name for p in (tmp_path / "patches").iterdir() if p.name.startswith(".")]   # what the dead run left
    main(["sim", "-c", str(cfg), "--json", str(tmp_path / "sim.json")])   # any verb that reads pins.yaml recovers
    assert "removed what a killed run" in capsys.readouterr().err
    assert not [p.name for p in (tmp_path / "patches").iterdir() if p.name.startswith(".")]
    assert main(["rebase", "ggml-org#7", "-c", str(cfg), "--as-series", "patches/pr7"]) == 0
    assert sorted(p.name for p in (tmp_path / "patches").iterdir()) == ["first", "pr7"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert "patches: patches/pr7" in cfg.read_text()


def test_a_run_killed_between_the_folder_and_pins_yaml_is_finished_by_the_next_run(make_repo, tmp_path, capsys):
    """Killed after the series folder went in, before pins.yaml names it: the rerun found `patches/pr7` not empty
    and refused for good. A folder holding exactly the series it exports is that run's: the rerun finishes it.
    A folder holding anything else is still refused."""
    up, head, cfg = setup(tmp_path, make_repo)
    before = cfg.read_bytes()
    _killed_run(tmp_path, cfg, "yaml")
    assert cfg.read_bytes() == before
    series = {p.name: p.read_bytes() for p in (tmp_path / "patches" / "pr7").iterdir()}
    assert sorted(series) == ["0001-pr-first.patch", "0002-pr-second.patch"]
    assert main(["rebase", "ggml-org#7", "-c", str(cfg), "--as-series", "patches/pr7"]) == 0
    assert "patches: patches/pr7" in cfg.read_text()
    assert {p.name: p.read_bytes() for p in (tmp_path / "patches" / "pr7").iterdir()} == series
    assert not [p for p in tmp_path.rglob(".*") if ".pinset-" in p.name]
    # the same folder with one byte changed is the user's: refused, nothing changed
    cfg.write_bytes(before)
    first = tmp_path / "patches" / "pr7" / "0001-pr-first.patch"
    first.write_bytes(first.read_bytes() + b"\n")
    assert main(["rebase", "ggml-org#7", "-c", str(cfg), "--as-series", "patches/pr7"]) == 2
    assert "not an empty folder" in capsys.readouterr().err and cfg.read_bytes() == before
