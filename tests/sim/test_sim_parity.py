"""3-way parity with upstream's newer history (issue 32): a pin written on upstream's default branch, newer
than the build, or on another of upstream's branches or tags, merges where `git am -3` in a full clone of
upstream merges it; other refs of the cache (forks, other PRs, refs an earlier run fetched that upstream no
longer has) never change the answer, and neither does the memo.

Ground truth: `git am -3` of the pin on the build in a full clone of upstream (status and tree)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from pinset.config.schema import load_pinset
from pinset.sim.run import simulate
from pinset.store import Store
from pinset.upstream.mirror import url_key
from tests.testing import GIT_ENV, git_am_3, write_pins

LINES = "".join(f"line {i}\n" for i in range(1, 31))
# Upstream's master, after the build: line 10 reads "ten". The pin is written there; its hunk (line 12)
# has line 10 as context, so on the build it applies only by a 3-way merge with master's blob.
NEWER = LINES.replace("line 10\n", "ten\n")
PINNED = NEWER.replace("line 12\n", "twelve\n")
# A second pin written on a side branch that only a fork / another PR holds (never upstream's default branch).
SIDE = LINES.replace("line 20\n", "twenty\n")
SIDE_PINNED = SIDE.replace("line 22\n", "twenty-two\n")


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, check=check,
                          capture_output=True, text=True)


def world(make_repo, tmp_path):
    """Upstream: base (tag b-old) -> master "ten". The pin `newer` is written on master in a clone of its
    own (its commit never reaches upstream); the pin `side` on a branch of that clone. `side` comes first:
    its lookup fetches upstream's default branch before `newer` is applied (the memo key must hold its tip)."""
    up = make_repo("upstream")
    up.commit("base", {"src/f.c": LINES, "README": "r\n"})
    up.tag("b-old")
    up.commit("upstream change", {"src/f.c": NEWER})
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(up.path), str(work))
    (work / "src/f.c").write_text(PINNED)
    git(work, "commit", "-q", "-am", "the pin")
    git(work, "format-patch", "-q", "-o", str(tmp_path / "newer"), "HEAD~1..HEAD")
    git(work, "checkout", "-q", "-b", "side", "b-old")
    (work / "src/f.c").write_text(SIDE)
    git(work, "commit", "-q", "-am", "side change")
    (work / "src/f.c").write_text(SIDE_PINNED)
    git(work, "commit", "-q", "-am", "side pin")
    git(work, "format-patch", "-q", "-o", str(tmp_path / "side"), "HEAD~1..HEAD")
    cfg = write_pins(tmp_path / "pins.yaml", f"""
        upstream: {up.path}
        builds: [b-old]
        pins:
          - id: side
            patches: side
          - id: newer
            patches: newer
    """)
    return up, work, cfg


def git_am_truth(up: Path, tmp_path: Path, build: str, clone: Path | None = None) -> tuple[dict[str, str], str]:
    """Each pin's status by `git am -3` in order on `build` in a full clone of upstream (made at `clone`), and
    the final tree."""
    return git_am_3(up, clone or tmp_path / f"clone-{build}", build,
                    [(name, tmp_path / name) for name in ("side", "newer")])


def sim_on(cfg: Path, cache: Path, builds=("b-old",)):
    with simulate(load_pinset(cfg), list(builds), Store.open(str(cache))) as sim:
        return [(b.tree, [(p.id, p.status, p.apply_mode, p.detail) for p in b.pins]) for b in sim.result.builds]


def test_pin_written_on_newer_upstream_merges_as_git_am_3_in_a_full_clone(make_repo, tmp_path):
    up, _, cfg = world(make_repo, tmp_path)
    truth, tree = git_am_truth(up.path, tmp_path, "b-old")
    assert truth == {"newer": "applied", "side": "conflict"}   # the comparison has teeth
    [(got_tree, pins)] = sim_on(cfg, tmp_path / "cache")
    assert {pin: status for pin, status, _, _ in pins} == truth, pins
    assert got_tree == tree
    assert {pin: mode for pin, _, mode, _ in pins}["newer"] == "3-way"


def test_other_refs_in_the_cache_never_change_the_answer(make_repo, tmp_path):
    """A fork's branches, an earlier run's tag, PR and forecast refs, and upstream branches and tags an earlier
    run saw that upstream no longer has, all holding the side pin's preimage: the same answer as a fresh cache
    (only upstream's refs as they are now and the build's history count)."""
    up, work, cfg = world(make_repo, tmp_path)
    fresh = sim_on(cfg, tmp_path / "fresh")
    warm = Store.open(str(tmp_path / "warm"))
    sim_on(cfg, tmp_path / "warm")
    side = git(work, "rev-parse", "side~1").stdout.strip()
    space = f"refs/pinset/upstream-refs/{url_key(str(up.path))}/"   # where this upstream's refs are fetched
    fork = f"refs/pinset/fork/{url_key('x')}"   # a fork's refs, named as pinset names them (an old name is removed)
    other = f"refs/pinset/upstream-refs/{url_key('y')}"   # another upstream's
    for refspec in (f"+refs/heads/*:{fork}/heads/*", f"+{side}:refs/pinset/upstream/tags/b-side",
                    f"+{side}:refs/pinset/pr/o/r/1", f"+{side}:refs/pinset/forecast/1",
                    f"+{side}:{space}heads/gone", f"+{side}:{space}tags/gone", f"+{side}:{other}/heads/x"):
        git(tmp_path, "--git-dir", str(warm.mirror), "fetch", "-q", str(work), refspec)
    assert sim_on(cfg, tmp_path / "warm") == fresh
    assert [status for _, status, _, _ in fresh[0][1]] == ["conflict", "applied"]


def test_a_memoised_merge_is_not_replayed_once_upstream_no_longer_holds_its_preimage(make_repo, tmp_path):
    """Upstream's master rewound past the commit the pin was written on: the mirror still holds the blob (and
    the memo the earlier answer), but a full clone no longer does, so neither does the sim."""
    up, _, cfg = world(make_repo, tmp_path)
    cache = tmp_path / "cache"
    assert [s for _, s, _, _ in sim_on(cfg, cache)[0][1]] == ["conflict", "applied"]
    up.git("reset", "-q", "--hard", "b-old")
    up.git("commit", "-q", "--allow-empty", "-m", "another master")
    up.git("reflog", "expire", "--expire=now", "--all")
    up.git("gc", "-q", "--prune=now")
    truth, tree = git_am_truth(up.path, tmp_path, "b-old")
    assert truth == {"newer": "conflict", "side": "conflict"}
    fresh = sim_on(cfg, tmp_path / "fresh")
    again = sim_on(cfg, cache)
    assert again == fresh
    assert [s for _, s, _, _ in again[0][1]] == ["conflict", "conflict"] and again[0][0] == tree


def test_sdist_build_of_an_upstream_commit_merges_with_upstreams_preimages(make_repo, tmp_path):
    """An sdist tree carries no history: its preimages come from upstream's default branch, as for a git build
    of the same tree (the same answer on both)."""
    from tests.sim.test_sim_determinism import fake_sdist

    up, _, cfg = world(make_repo, tmp_path)
    old = up.git("rev-parse", "b-old").strip()
    sdist = fake_sdist(tmp_path / "cache", "0.0.1", old, {"src/f.c": LINES, "README": "r\n"})
    (git_tree, git_pins), (sdist_tree, sdist_pins) = sim_on(cfg, tmp_path / "cache", ("b-old", sdist))
    assert [p[1:3] for p in sdist_pins] == [p[1:3] for p in git_pins] == [("conflict", None), ("applied", "3-way")]
    assert sdist_tree == git_tree


def test_apply_pick_and_blame_use_the_same_lookup(make_repo, tmp_path, capsys):
    """`pinset apply` writes the tree `git am -3` gives; pick's and blame's probes count the pin as applied."""
    import json

    from pinset.cli import main

    up, _, cfg = world(make_repo, tmp_path)
    truth, _ = git_am_truth(up.path, tmp_path, "b-old")
    only = write_pins(tmp_path / "newer.yaml", f"""
        upstream: {up.path}
        builds: [b-old]
        pins:
          - id: newer
            patches: newer
    """)
    out = tmp_path / "tree"
    assert main(["apply", "-c", str(only), "--build", "b-old", "--out", str(out)]) == 0, capsys.readouterr()
    assert (out / "src/f.c").read_text() == (tmp_path / "clone-b-old" / "src/f.c").read_text()
    assert "twelve\n" in (out / "src/f.c").read_text() and "line 10\n" in (out / "src/f.c").read_text()
    pick = tmp_path / "pick.json"
    assert main(["pick", "-c", str(only), "--builds", "b-old", "--json", str(pick)]) == 0, capsys.readouterr()
    assert json.loads(pick.read_text())["picked"] == "b-old"
    blame = tmp_path / "blame.json"
    up.tag("b-new")
    assert main(["blame", "-c", str(only), "--good", "b-old", "--bad", "b-new", "--json", str(blame)]) == 0
    assert json.loads(blame.read_text())["pins"][0]["status"] == "ok"


def test_unreachable_upstream_when_the_lookup_needs_it_is_an_error_not_another_verdict(make_repo, tmp_path, capsys,
                                                                                         monkeypatch):
    """Offline, upstream's default branch cannot be had: one line, exit 2, rather than the verdict of a cache
    that happened to hold it (or not)."""
    from pinset.cli import main

    up, _, _ = world(make_repo, tmp_path)
    monkeypatch.setenv("PINSET_CACHE", str(tmp_path / "c"))
    text = """
        upstream: {}
        builds: [b-old]
        pins:
          - id: newer
            patches: newer
    """
    assert main(["sim", "-c", str(write_pins(tmp_path / "pins.yaml", text.format(up.path)))]) == 0
    # The same upstream, now out of reach (nothing listens there); the mirror still has b-old, the blob and the memo.
    cfg = write_pins(tmp_path / "pins.yaml", text.format("https://127.0.0.1:9/llama.cpp"))
    capsys.readouterr()
    assert main(["sim", "-c", str(cfg)]) == 2   # as an unreachable upstream is for a build or a base-commit
    err = capsys.readouterr().err
    assert "unreachable, needed for the preimages of a 3-way merge" in err, err
    assert len(err.strip().splitlines()) == 1


def test_a_fetch_of_the_default_branch_that_fails_otherwise_is_an_error_too(make_repo, tmp_path, capsys, monkeypatch):
    """Upstream answers but cannot send its default branch (here: its newest commit lost, as a broken pack or a
    cut connection would): no answer, exit 2, not the verdict of a lookup without upstream's preimages."""
    from pinset.cli import main

    up, _, cfg = world(make_repo, tmp_path)
    head = up.git("rev-parse", "HEAD").strip()
    (up.path / ".git" / "objects" / head[:2] / head[2:]).unlink()
    monkeypatch.setenv("PINSET_CACHE", str(tmp_path / "c"))
    assert main(["sim", "-c", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "its default branch could not be fetched" in err and "needed for the preimages of a 3-way merge" in err
    assert len(err.strip().splitlines()) == 1, err


def _publish_side(up, work: Path, tmp_path: Path, how: str) -> str:
    """Upstream gains the commit the `side` pin was written on (never its pin): as a branch, or as a tag only."""
    side = git(work, "rev-parse", "side~1").stdout.strip()
    git(work, "push", "-q", str(up.path), f"{side}:refs/heads/release/b1" if how == "branch" else f"{side}:refs/tags/v-side")
    return side


def test_pin_written_on_an_upstream_side_branch_or_tag_merges_as_in_a_full_clone(make_repo, tmp_path):
    """A full clone has every branch and tag of upstream (not only the default branch): a pin written on a
    release branch, or on a commit only a tag holds, merges there, so it merges in the sim. A tag of a tree
    (upstream may have one) names no history and is passed over."""
    up, work, cfg = world(make_repo, tmp_path)
    up.git("tag", "a-tree", "HEAD^{tree}")
    results = {}
    for how in ("branch", "tag"):
        _publish_side(up, work, tmp_path, how)
        truth, tree = git_am_truth(up.path, tmp_path, "b-old", tmp_path / f"clone-{how}")
        assert truth == {"side": "applied", "newer": "applied"}, how   # the comparison has teeth (see world)
        [(got_tree, pins)] = results[how] = sim_on(cfg, tmp_path / f"cache-{how}")
        assert {pin: status for pin, status, _, _ in pins} == truth, (how, pins)
        assert [mode for _, _, mode, _ in pins] == ["3-way", "3-way"]
        assert got_tree == tree
        if how == "branch":
            up.git("branch", "-D", "release/b1")


def test_an_upstream_branch_that_went_no_longer_counts_on_a_warm_cache(make_repo, tmp_path):
    """A run saw the side pin's preimage on upstream's branch (and remembered the answer); upstream then
    deleted the branch: the next run on the same cache answers as a fresh cache and a full clone made now."""
    up, work, cfg = world(make_repo, tmp_path)
    _publish_side(up, work, tmp_path, "branch")
    cache = tmp_path / "cache"
    assert [s for _, s, _, _ in sim_on(cfg, cache)[0][1]] == ["applied", "applied"]
    up.git("branch", "-D", "release/b1")
    up.git("reflog", "expire", "--expire=now", "--all")
    up.git("gc", "-q", "--prune=now")
    truth, tree = git_am_truth(up.path, tmp_path, "b-old")
    assert truth == {"side": "conflict", "newer": "applied"}
    again = sim_on(cfg, cache)
    assert again == sim_on(cfg, tmp_path / "fresh")
    assert [s for _, s, _, _ in again[0][1]] == ["conflict", "applied"] and again[0][0] == tree
