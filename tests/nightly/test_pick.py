"""`pinset pick` on a synthetic upstream with release tags (fast-import history, real git)."""

from __future__ import annotations

import json

import pytest

from pinset.cli import main
from pinset.config.schema import load_pinset
from pinset.errors import PinsetError
from pinset.nightly.model import PickResult
from pinset.nightly.pick import pick
from pinset.sim.pins import prepare_pins
from pinset.store import Store
from pinset.upstream.builds import Build, resolve_builds
from pinset.upstream.mirror import Mirror
from pinset.upstream.select import order_oldest_first
from tests.testing import GitRepo, without_start
from tests.testing.history import FastHistory
from tests.testing.nightly import BROKEN_MMQ, MMQ_CU, README, TYPES_H, feat_and_types, import_history

# tags in history order b9 < b10 < b11 < b12 (by name, b10 < b11 < b12 < b9)
TAGS = {10: "b9", 20: "b10", 30: "b11", 40: "b12"}
BREAK = 25
CMAKE = 'cmake_minimum_required(VERSION 3.14)\nproject(fake C)\nmessage(FATAL_ERROR "this upstream does not build")\n'


@pytest.fixture
def world(tmp_path):
    up = GitRepo(tmp_path / "upstream")
    h = FastHistory()
    base = h.commit("base", {"src/types.h": TYPES_H, "src/mmq.cu": MMQ_CU, "README": README, "src/noise.c": "0\n",
                                 "CMakeLists.txt": CMAKE})
    marks = {0: base}
    for i in range(1, 41):
        files = {"src/noise.c": f"{i}\n"}
        if i == BREAK:
            files["src/mmq.cu"] = BROKEN_MMQ
        marks[i] = h.commit(f"change {i} (#{7000 + i})", files)
        if i in TAGS:
            h.tag(TAGS[i], marks[i])
    shas = import_history(h, up, marks)
    cfg = feat_and_types(up, shas[0], tmp_path / "patches", tmp_path / "pins.yaml", "b11, b9, b12, b10")
    return up, cfg, shas


def run_pick(cfg, tmp_path, *extra):
    out = tmp_path / "pick.json"
    code = main(["pick", "-c", str(cfg), "--json", str(out), "--markdown", str(tmp_path / "pick.md"), *extra])
    return code, json.loads(out.read_text()) if out.exists() else None


def test_pick_names_the_newest_green_build_and_why_newer_ones_were_passed_over(world, tmp_path):
    up, cfg, shas = world
    code, doc = run_pick(cfg, tmp_path)
    assert code == 0 and doc["kind"] == "pick" and doc["schema"] == 1 and doc["picked"] == "b10"
    rows = doc["builds"]
    assert [b["build"] for b in rows] == ["b12", "b11", "b10", "b9"]  # by history, not by name
    assert [b["verdict"] for b in rows] == ["not green", "not green", "picked", "not tried"]
    (reason,) = rows[1]["reasons"]
    assert reason["pin"] == "feat" and reason["status"] == "conflict" and reason["files"] == ["src/mmq.cu"]
    assert reason["conflict_with"] == "upstream"
    # the newer build is blamed against the picked one: the upstream commit that broke the pin
    assert reason["upstream_commit"]["commit"] == shas[BREAK] and reason["upstream_commit"]["pr"] == 7000 + BREAK
    assert f"since upstream commit {shas[BREAK][:12]} (#{7000 + BREAK}) in src/mmq.cu" in reason["summary"]
    assert rows[2]["reasons"] == [] and rows[2]["commit"] == shas[20]
    assert "Base: picked **b10**" in (tmp_path / "pick.md").read_text()
    assert PickResult.from_json(doc).to_json() == without_start(doc)


def test_pick_with_a_tag_selector_on_the_command_line(world, tmp_path):
    _, cfg, _ = world
    code, doc = run_pick(cfg, tmp_path, "--builds", "tags:b*:3")
    assert code == 0 and doc["picked"] == "b10"
    assert [b["build"] for b in doc["builds"]] == ["b12", "b11", "b10"]  # the 3 newest by history: not b9


def test_pick_exits_1_when_no_build_is_green(world, tmp_path):
    _, cfg, _ = world
    code, doc = run_pick(cfg, tmp_path, "--builds", "b11,b12")
    assert code == 1 and doc["picked"] is None and not doc["ok"]
    assert [b["verdict"] for b in doc["builds"]] == ["not green", "not green"]
    assert all(b["reasons"][0]["upstream_commit"] is None for b in doc["builds"])  # nothing green to blame from


def test_pick_verify_falls_back_to_the_next_older_green_build(world, tmp_path):
    """The confirmation is an explicit parameter: here it fails b10's gates, so b9 is picked."""
    _, cfg, _ = world
    pinset = load_pinset(cfg)
    store = Store.open(tmp_path / "cache2")
    asked = []

    def confirm(build, result):
        asked.append(build.name)
        ok = build.name != "b10"
        return ok, {"failed_gates": [] if ok else ["cpu-build"]}

    with Mirror(store.mirror) as mirror:
        builds = order_oldest_first(resolve_builds(list(pinset.builds), pinset.upstream, cfg.parent, store, mirror),
                                    mirror)
        result = pick(pinset, mirror, prepare_pins(pinset, store, mirror), list(reversed(builds)), confirm)
    assert asked == ["b10", "b9"] and result.picked == "b9" and result.verified
    verdicts = {b.build: b.verdict for b in result.builds}
    assert verdicts == {"b12": "not green", "b11": "not green", "b10": "verify failed", "b9": "picked"}
    assert result.builds[2].reasons[0].summary() == "verify failed: cpu-build"


def test_pick_verify_for_real_with_a_tree_that_does_not_build(world, tmp_path):
    """Real `pinset verify` gates: the synthetic tree's CMake configure fails, so every green build fails
    its cpu-build gate and nothing is picked (a pick never stands on an unbuilt tree)."""
    _, cfg, _ = world
    code, doc = run_pick(cfg, tmp_path, "--verify", "--builds", "b9,b10,b11", "--no-progress", "-j", "1")
    assert code == 1 and doc["picked"] is None and doc["verified"]
    rows = {b["build"]: b for b in doc["builds"]}
    assert rows["b11"]["verdict"] == "not green"
    for name in ("b10", "b9"):
        assert rows[name]["verdict"] == "verify failed" and "cpu-build" in rows[name]["verify"]["failed_gates"]
        assert rows[name]["verify"]["ok"] is False


@pytest.mark.parametrize("args, message", [
    (["--cuda"], "--cuda needs --verify"),
    (["--builds", "tags:b*"], "how many of the newest tags"),
    (["--builds", "b9,no-such-tag"], "no such tag"),
    (["--builds", "tags:zz*:2"], "no tag at"),
])
def test_pick_bad_input_is_one_line_exit_2(world, tmp_path, capsys, args, message):
    _, cfg, _ = world
    code = main(["pick", "-c", str(cfg), "--json", str(tmp_path / "x.json"), *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.json").exists()


def test_pypi_builds_are_ordered_by_version():
    builds = [Build(f"pypi:llama-cpp-python=={v}", "x", "o", "t", "pypi") for v in ("0.3.9", "0.3.36", "0.3.10")]
    ordered = order_oldest_first(builds, mirror=None)
    assert [b.name.split("==")[1] for b in ordered] == ["0.3.9", "0.3.10", "0.3.36"]


def test_mixed_builds_order_a_pypi_build_at_its_upstream_commit(world, tmp_path):
    _, cfg, shas = world
    pinset = load_pinset(cfg)
    store = Store.open(tmp_path / "cache3")
    with Mirror(store.mirror) as mirror:
        git_builds = resolve_builds(["b12", "b9", "b10"], pinset.upstream, cfg.parent, store, mirror)
        vendored = Build("pypi:llama-cpp-python==0.3.99", shas[15][:9], "o", "t", "pypi")
        ordered = order_oldest_first([*git_builds, vendored], mirror)
        assert [b.name for b in ordered] == ["b9", "pypi:llama-cpp-python==0.3.99", "b10", "b12"]
        stranger = Build("pypi:llama-cpp-python==0.3.98", "0123456789", "o", "t", "pypi")
        with pytest.raises(PinsetError, match="cannot order pypi:llama-cpp-python==0.3.98 among git builds"):
            order_oldest_first([*git_builds, stranger], mirror)
