"""3-way parity on real llama.cpp history (issue 32): sim merges where `git am -3` in a full clone merges.

Upstream is a replay of two real files (src/llama-model-loader.cpp, common/common.h) through the
llama-cpp-python sdists 0.3.33..0.3.36 (one commit each, tagged). The pins are written on the 0.3.33 commit
(and some on the 0.3.36 commit, upstream's default branch) in a clone of their own and exported without
`base-commit:`; their preimages are only in upstream's history (for the 0.3.36 ones: newer than the older
builds). Ground truth: `git am -3` of the pins in order on each build in a full clone of upstream (a pin
that fails is aborted and the next goes on). Same status for every pin and build, same trees.
Needs the sdists: downloaded from PyPI into PINSET_SDIST_CACHE when not there yet.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from pinset.config.schema import load_pinset
from pinset.sim.run import simulate
from pinset.store import Store
from pinset.upstream.mirror import url_key
from tests.testing import write_pins
from tests.testing.history import GIT_ENV, FastHistory
from tests.testing.snapshots import sdist_file

pytestmark = pytest.mark.slow

VERSIONS = ["0.3.33", "0.3.34", "0.3.35", "0.3.36"]
FILES = ["src/llama-model-loader.cpp", "common/common.h"]
LOADER_AT = [4, 40, 320, 560, 880, 1250]  # 0.3.33 lines a pin inserts after (upstream rewrote some nearby)
NEWER_AT = [40, 560, 880]                 # 0.3.36 lines a pin written there inserts after
IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV, **IDENTITY}, check=check,
                          capture_output=True, text=True)


def snapshot_files(version: str) -> dict[str, bytes]:
    sdist = sdist_file(version)
    top = f"llama_cpp_python-{version}/vendor/llama.cpp/"
    with tarfile.open(sdist) as tar:
        return {path: tar.extractfile(top + path).read() for path in FILES}  # type: ignore[union-attr]


def insert_after(text: str, line: int, new: str) -> str:
    lines = text.splitlines(True)
    return "".join(lines[:line] + [new] + lines[line:])


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(upstream repo, pins.yaml, pin ids): the replayed history and the pins written on its 0.3.33 commit."""
    root = tmp_path_factory.mktemp("parity")
    texts = {v: snapshot_files(v) for v in VERSIONS}
    up = root / "upstream"
    git(root, "init", "-q", "-b", "master", str(up))
    history = FastHistory()
    marks = []
    for v in VERSIONS:
        marks.append(history.commit(f"llama.cpp as vendored in {v}", {p: texts[v][p] for p in FILES}))
        history.tag(f"t{v}", marks[-1])
    history.write(up)
    git(up, "checkout", "-q", "-f", "master")
    # The pins' own clone: their commits never reach upstream (a full clone of it has only upstream's history).
    work = root / "work"
    git(root, "clone", "-q", str(up), str(work))
    old = {p: texts["0.3.33"][p].decode() for p in FILES}
    new = {p: texts["0.3.34"][p].decode() for p in FILES}
    pins: list[tuple[str, Path]] = []

    def pin(name: str, commits: list[dict[str, str]], on: str = "t0.3.33") -> None:
        git(work, "checkout", "-q", "-B", name, on)
        for n, files in enumerate(commits):
            for path, text in files.items():
                (work / path).write_text(text)
            git(work, "commit", "-q", "-am", f"{name} {n + 1}")
        out = root / "pins" / name
        git(work, "format-patch", "-q", "-o", str(out), f"{on}..{name}")
        pins.append((name, out))

    loader = "src/llama-model-loader.cpp"
    for at in LOADER_AT:
        pin(f"loader-{at}", [{loader: insert_after(old[loader], at, f"// pinned after line {at}\n")}])
    common = "common/common.h"
    first = insert_after(old[common], 100, "// series step 1\n")
    pin("common-series", [{common: first}, {common: insert_after(first, 103, "// series step 2\n")}])
    # Part of it upstream took in 0.3.34 (its hunk at line 643), part a local edit.
    took = new[common].splitlines(True)[643:646]
    partial = insert_after(insert_after(old[common], 30, "// local\n"), 643, "".join(took))
    pin("common-partial", [{common: partial}])
    # Written on upstream's newest commit (its default branch): on the older builds their preimages are only
    # in that newer history, where `git am -3` in a full clone finds them.
    newest = {p: texts["0.3.36"][p].decode() for p in FILES}
    for at in NEWER_AT:
        pin(f"newer-loader-{at}", [{loader: insert_after(newest[loader], at, f"// pinned on 0.3.36 after line {at}\n")}],
            on="t0.3.36")
    cfg = write_pins(root / "pins.yaml", f"upstream: {up}\nbuilds: [{', '.join('t' + v for v in VERSIONS)}]\npins:\n"
                     + "".join(f"  - id: {name}\n    patches: {out}\n" for name, out in pins))
    return up, cfg, pins


def git_am_truth(up: Path, clone: Path, pins, build: str) -> tuple[dict[str, str], str, dict[str, bool]]:
    """Each pin's status by `git am -3` in order on `build` in a full clone, the final tree, and which
    pins needed the 3-way merge (plain `git am` fails)."""
    git(clone, "checkout", "-q", "--detach", "-f", f"t{build}")
    status, merged = {}, {}
    for name, folder in pins:
        before = git(clone, "rev-parse", "HEAD").stdout
        patches = sorted(str(p) for p in folder.glob("*.patch"))
        plain = git(clone, "am", "-q", *patches, check=False)
        if plain.returncode == 0:
            merged[name] = False
            git(clone, "reset", "-q", "--hard", before.strip())
        else:
            git(clone, "am", "--abort", check=False)
            merged[name] = True
        done = git(clone, "am", "-q", "-3", *patches, check=False)
        if done.returncode != 0:
            git(clone, "am", "--abort", check=False)
            status[name] = "conflict"
        else:
            status[name] = "applied" if git(clone, "rev-parse", "HEAD").stdout != before else "upstream"
    return status, git(clone, "rev-parse", "HEAD^{tree}").stdout.strip(), merged


def test_sim_matches_git_am_3_in_a_full_clone_on_real_history(world, tmp_path):
    up, cfg, pins = world
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(up), str(clone))
    builds = [f"t{v}" for v in VERSIONS]
    with simulate(load_pinset(cfg), builds, Store.open(str(tmp_path / "cache"))) as sim:
        three_way = conflicts = newer = 0
        for v, result in zip(VERSIONS, sim.result.builds):
            status, tree, merged = git_am_truth(up, clone, pins, v)
            got = {p.id: p.status for p in result.pins}
            assert got == status, (v, {p.id: p.detail for p in result.pins if got[p.id] != status[p.id]})
            assert result.tree == tree, v
            three_way += sum(merged[n] and status[n] == "applied" for n in status)
            newer += sum(merged[n] and status[n] == "applied" for n in status if n.startswith("newer-") and v != "0.3.36")
            conflicts += sum(s == "conflict" for s in status.values())
    # The comparison has teeth: pins that only a 3-way merge with upstream's preimages applies, and conflicts.
    assert three_way >= 3 and conflicts >= 1, (three_way, conflicts)
    # ... and pins written on newer upstream that only its history's preimages merge onto older builds.
    assert newer >= 1, newer


def test_same_verdict_on_a_cache_that_holds_the_pins_own_commits(world, tmp_path):
    """The pins' branch fetched into the mirror (their postimages, the series' middle blob) changes nothing."""
    up, cfg, pins = world
    builds = [f"t{v}" for v in VERSIONS]
    fresh_store = Store.open(str(tmp_path / "fresh"))
    with simulate(load_pinset(cfg), builds, fresh_store) as sim:
        fresh = [(b.tree, [(p.id, p.status, p.detail) for p in b.pins]) for b in sim.result.builds]
    warm = Store.open(str(tmp_path / "warm"))
    with simulate(load_pinset(cfg), builds[:1], warm) as sim:
        pass
    work = up.parent / "work"
    fork = f"refs/pinset/fork/{url_key('x')}"   # a fork's refs, named as pinset names them
    git(work, "fetch", "-q", "--no-tags", str(work), f"+refs/heads/*:{fork}/*")
    subprocess.run(["git", "--git-dir", str(warm.mirror), "fetch", "-q", str(work), f"+refs/heads/*:{fork}/*"],
                   check=True, capture_output=True, env={**os.environ, **GIT_ENV})
    with simulate(load_pinset(cfg), builds, warm) as sim:
        again = [(b.tree, [(p.id, p.status, p.detail) for p in b.pins]) for b in sim.result.builds]
    assert again == fresh
