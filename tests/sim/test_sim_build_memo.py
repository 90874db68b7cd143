"""The whole-build memo (sim/memo.py BuildMemo): a build whose answer is known costs no engine git at all,
and the answer is the one the engine gives, keyed by every input it reads."""

from __future__ import annotations

import json
import shutil

from pinset import runner
from pinset.sim.preimages import Preimages
from pinset.store import read_checked, write_checked
from tests.sim.test_sim import pin_set, world  # noqa: F401  (the fixture)
from tests.testing.sim import by_id, run_sim

# what the engine starts for a build it works out (indexes, object dirs, applies, probes, trees)
ENGINE_GIT = {"apply", "read-tree", "update-index", "ls-tree", "ls-files", "pack-objects", "write-tree",
              "merge-base", "log"}


def _gits(monkeypatch) -> list[str]:
    """The git subcommand of every program pinset starts through runner.run from now on (real git runs); the
    config's check of the patch files (`git apply --numstat`) is `numstat`."""
    seen: list[str] = []
    real = runner.run

    def watching(argv, **kw):
        words = [str(a) for a in argv]
        if words and words[0] == "git":
            rest = words[1:]
            while rest and rest[0] in ("-c", "--git-dir", "--work-tree", "-C"):
                rest = rest[2:]
            seen.append("numstat" if rest[:2] == ["apply", "--numstat"] else rest[0] if rest else "")
        return real(argv, **kw)

    monkeypatch.setattr(runner, "run", watching)
    return seen


def _entries(cache):
    return sorted((cache / "memo" / "build").rglob("*.json"))


def test_a_known_build_costs_no_engine_git_and_processes_do_not_grow_with_builds(
        world, tmp_path, monkeypatch, isolated_cache):  # noqa: F811
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b1", "b2", "b3"], pins, "feat-iq1m", "readme-note", "rival")
    gits = _gits(monkeypatch)
    code, first = run_sim(tmp_path, cfg)
    assert ENGINE_GIT & set(gits), "the first run works each build out"
    assert len(_entries(isolated_cache)) == 3
    gits.clear()
    code2, second = run_sim(tmp_path, cfg)
    assert (code2, second) == (code, first)
    assert not ENGINE_GIT & set(gits), gits
    three = len(gits)
    one = tmp_path / "one"
    one.mkdir()
    gits.clear()
    _, alone = run_sim(one, pin_set(one, up, ["b2"], pins, "feat-iq1m", "readme-note", "rival"))
    assert alone["builds"][0] == first["builds"][1]   # b2's answer, kept by the 3-build run
    # the same few for 1 build as for 3, none per build or pin: pins.yaml's upstream and patches checked, the
    # mirror's refs checked (for-each-ref, cat-file), the builds' trees checked whole (one rev-list)
    assert len(gits) == three <= 5, gits


def test_a_changed_patch_is_a_new_key(world, tmp_path, isolated_cache):  # noqa: F811
    up, pins = world
    mine = tmp_path / "mine"
    shutil.copytree(pins / "readme-note", mine / "readme-note")
    cfg = pin_set(tmp_path, up, ["b1", "b2"], mine, "readme-note")
    _, first = run_sim(tmp_path, cfg)
    assert by_id(first["builds"][0])["readme-note"]["touched"] == ["README"]
    patch = next((mine / "readme-note").glob("*.patch"))
    patch.write_bytes(next((pins / "rival").glob("*.patch")).read_bytes())   # same name, other change
    _, second = run_sim(tmp_path, cfg)
    assert by_id(second["builds"][0])["readme-note"]["touched"] == ["src/types.h"]
    assert len(_entries(isolated_cache)) == 4


def test_a_damaged_entry_or_one_naming_an_object_the_mirror_lacks_is_a_miss(
        world, tmp_path, monkeypatch, isolated_cache):  # noqa: F811
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b1", "b2", "b3"], pins, "feat-iq1m", "readme-note", "rival")
    _, first = run_sim(tmp_path, cfg)
    damaged, lacking = _entries(isolated_cache)[:2]
    damaged.write_text(damaged.read_text()[:-10])   # cut short: its digest no longer matches
    doc = json.loads(read_checked(lacking) or b"{}")
    doc["needs"].append("0123456789abcdef0123456789abcdef01234567")   # an object no mirror has
    write_checked(lacking, json.dumps(doc).encode())
    gits = _gits(monkeypatch)
    _, again = run_sim(tmp_path, cfg)
    assert again == first
    assert gits.count("read-tree") >= 2   # both builds worked out again (their index loaded), the third not


def test_the_key_covers_the_search_set_of_the_preimage_lookup(world, tmp_path, monkeypatch,
                                                              isolated_cache):  # noqa: F811
    """A build's answer may use preimages from history (sim/preimages.py): the search set that lookup may
    read (Preimages.key: the build's commit, upstream's default branch as fetched) is part of the key, so a
    lookup that would read more is a new key."""
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b1", "b2"], pins, "feat-iq1m", "rival")
    _, first = run_sim(tmp_path, cfg)
    gits = _gits(monkeypatch)
    run_sim(tmp_path, cfg)
    assert "read-tree" not in gits
    real = Preimages.key
    monkeypatch.setattr(Preimages, "key", lambda self, history: (*real(self, history), "f" * 40))
    _, again = run_sim(tmp_path, cfg)
    assert again == first and "read-tree" in gits
    assert len(_entries(isolated_cache)) == 4


def test_a_build_whose_lookup_fetched_upstream_is_known_by_upstreams_tip(make_repo, tmp_path, monkeypatch):
    """The first run keys the build before any lookup needed upstream's default branch (`unasked`); its
    lookup then fetched it. The next run meets the `asks_upstream` marker under that key, fetches first and
    finds the result under the key naming the tip: no engine git, the same answer, upstream still asked."""
    from tests.sim.test_sim_parity import sim_on, world as parity_world

    _, _, cfg = parity_world(make_repo, tmp_path)
    cache = tmp_path / "cache"
    first = sim_on(cfg, cache)
    docs = [json.loads(read_checked(path) or b"{}") for path in _entries(cache)]
    assert {"asks_upstream": True} in docs and any("result" in doc for doc in docs), docs
    gits = _gits(monkeypatch)
    assert sim_on(cfg, cache) == first
    assert "fetch" in gits and not ENGINE_GIT & set(gits), gits
