"""Adversarial histories for `pinset blame` and `pinset pick`: non-monotone breaks, side branches,
a --good on which a pin is already broken, builds sharing a commit (real git, fast-import)."""

from __future__ import annotations

import json

import pytest

from pinset.cli import main
from tests.testing import GitRepo, run_doc, write_pins
from tests.testing.history import FastHistory
from tests.testing.nightly import BROKEN_MMQ, FEAT, MMQ_CU, TYPES_H, feat_and_types, import_history, series


def make_world(tmp_path, mmq_at: dict[int, str], count: int, extra_pins: str = "", types_at=None):
    """`count` first-parent commits after b0; commit i sets src/mmq.cu to mmq_at[i] when given."""
    up = GitRepo(tmp_path / "upstream")
    h = FastHistory()
    marks = {0: h.commit("base", {"src/types.h": TYPES_H, "src/mmq.cu": MMQ_CU, "src/noise.c": "0\n"})}
    h.tag("b0", marks[0])
    for i in range(1, count + 1):
        files = {"src/noise.c": f"{i}\n"}
        if i in mmq_at:
            files["src/mmq.cu"] = mmq_at[i]
        if types_at and i in types_at:
            files["src/types.h"] = types_at[i]
        marks[i] = h.commit(f"change {i} (#{100 + i})", files)
    h.tag("bad", marks[count])
    shas = import_history(h, up, marks)
    cfg = feat_and_types(up, shas[0], tmp_path / "patches", tmp_path / "pins.yaml", "b0, bad", extra_pins)
    return up, cfg, shas


def blame_json(cfg, tmp_path, *args):
    out = tmp_path / "blame.json"
    code = main(["blame", "-c", str(cfg), "--json", str(out), *args])
    return code, run_doc(out.read_text()) if out.exists() else None


def test_a_pin_that_breaks_heals_and_breaks_again_is_not_blamed_on_one_commit(tmp_path):
    # broken on 10..19, fine again on 20..29, broken from 30 on
    up, cfg, shas = make_world(tmp_path, {10: BROKEN_MMQ, 20: MMQ_CU, 30: BROKEN_MMQ}, 40)
    code, doc = blame_json(cfg, tmp_path, "--good", "b0", "--bad", "bad", "--pin", "feat")
    assert code == 1
    feat = doc["pins"][0]
    assert feat["first_bad"]["commit"] == shas[10], "the first break, not a later one"
    assert feat["monotone"] is False
    assert "not monotone" in feat["summary"]


def test_a_pin_already_broken_on_good_is_not_tested_and_not_ok(tmp_path):
    up, cfg, shas = make_world(tmp_path, {5: BROKEN_MMQ}, 20)
    code, doc = blame_json(cfg, tmp_path, "--good", shas[5], "--bad", "bad", "--pin", "feat")
    assert code == 1 and doc["ok"] is False
    feat = doc["pins"][0]
    assert feat["status"] == "broken-on-good" and feat["first_bad"] is None
    assert "not bisected" in feat["summary"] and feat["good_status"] == "conflict"


def test_good_on_a_side_branch_bisects_only_commits_that_contain_it(tmp_path):
    """--good on a side branch merged into --bad's first-parent line: the first-parent commits before
    the merge do not contain --good, so a pin made on --good fails there for no fault of theirs."""
    up = GitRepo(tmp_path / "upstream")
    h = FastHistory()
    side_types = TYPES_H.replace("    GGML_TYPE_COUNT", "    GGML_TYPE_Q8_0 = 8,\n    GGML_TYPE_COUNT")
    marks = {0: h.commit("base", {"src/types.h": TYPES_H, "src/mmq.cu": MMQ_CU, "src/noise.c": "0\n"})}
    for i in range(1, 21):
        files = {"src/noise.c": f"{i}\n"}
        if i == 3:
            marks["side"] = h.commit("q8 type", {"src/types.h": side_types}, branch="side", parent=marks[2])
        if i == 12:
            files["src/types.h"] = side_types
            marks[i] = h.commit("Merge pull request #88 from x/q8", files, merge=marks["side"])
            continue
        if i == 16:
            files["src/types.h"] = side_types.replace("GGML_TYPE_COUNT", "GGML_TYPE_LAST")
        marks[i] = h.commit(f"change {i} (#{100 + i})", files)
    h.tag("bad", marks[20])
    shas = import_history(h, up, marks)
    series(up, shas["side"], "types", {"src/types.h": side_types.replace(
        "    GGML_TYPE_COUNT", "    GGML_TYPE_IQ1_S = 3,\n    GGML_TYPE_COUNT")}, tmp_path / "patches")
    cfg = write_pins(tmp_path / "pins.yaml", f"""
        upstream: {up.path}
        builds: [bad]
        pins:
          - id: types
            patches: patches/types
        """)
    code, doc = blame_json(cfg, tmp_path, "--good", shas["side"], "--bad", "bad")
    assert code == 1
    types = doc["pins"][0]
    assert types["status"] == "conflict" and types["first_bad"]["commit"] == shas[16]
    assert types["last_good"]["commit"] == shas[15]


def test_a_pin_that_conflicts_for_a_while_then_lands_is_reported_as_landed(tmp_path):
    """On --bad the pin is upstream: what a maintainer acts on is where it landed, not an earlier
    conflict upstream has since resolved by landing the change."""
    up, cfg, shas = make_world(tmp_path, {10: BROKEN_MMQ, 20: FEAT["src/mmq.cu"]}, 40)
    code, doc = blame_json(cfg, tmp_path, "--good", "b0", "--bad", "bad", "--pin", "feat")
    assert code == 1
    feat = doc["pins"][0]
    assert feat["bad_status"] == "upstream" and feat["status"] == "upstream"
    assert feat["first_bad"]["commit"] == shas[20] and feat["summary"].startswith("landed upstream in")


def test_a_pin_that_lands_then_is_reverted_and_conflicts_says_broke(tmp_path):
    up, cfg, shas = make_world(tmp_path, {10: FEAT["src/mmq.cu"], 20: BROKEN_MMQ}, 40)
    code, doc = blame_json(cfg, tmp_path, "--good", "b0", "--bad", "bad", "--pin", "feat")
    feat = doc["pins"][0]
    assert code == 1 and feat["bad_status"] == "conflict" and feat["status"] == "conflict"
    assert feat["first_bad"]["commit"] == shas[20] and feat["last_good"]["commit"] == shas[19]
    assert feat["summary"].startswith("conflicts with upstream since")


def test_pick_with_two_builds_on_one_commit_gives_both_the_same_verdict_class(tmp_path):
    up, cfg, shas = make_world(tmp_path, {10: BROKEN_MMQ}, 20)
    up.tag("alias-of-bad", "bad")
    out = tmp_path / "pick.json"
    code = main(["pick", "-c", str(cfg), "--json", str(out), "--builds", f"b0,bad,alias-of-bad,{shas[5]}"])
    doc = json.loads(out.read_text())
    rows = {b["build"]: b for b in doc["builds"]}
    assert code == 0 and doc["picked"] == shas[5]
    assert rows["bad"]["verdict"] == rows["alias-of-bad"]["verdict"] == "not green"
    assert rows["bad"]["commit"] == rows["alias-of-bad"]["commit"] == shas[20]
    for name in ("bad", "alias-of-bad"):
        (reason,) = rows[name]["reasons"]
        assert reason["upstream_commit"]["commit"] == shas[10]
    assert rows["b0"]["verdict"] == "not tried"


def test_pick_with_no_green_build_names_the_reason_for_each(tmp_path):
    up, cfg, shas = make_world(tmp_path, {10: BROKEN_MMQ}, 20, types_at={3: TYPES_H.replace("GGML_TYPE_COUNT", "GGML_TYPE_END")})
    out = tmp_path / "pick.json"
    code = main(["pick", "-c", str(cfg), "--json", str(out), "--builds", f"{shas[5]},bad"])
    doc = json.loads(out.read_text())
    assert code == 1 and doc["picked"] is None and doc["ok"] is False
    assert [b["verdict"] for b in doc["builds"]] == ["not green", "not green"]
    assert [sorted(r["pin"] for r in b["reasons"]) for b in doc["builds"]] == [["feat", "types"], ["types"]]  # newest first


def test_a_pin_that_lands_in_moved_code_is_blamed_where_it_landed(tmp_path):
    """Upstream moves src/mmq.cu into src/mmq/tiles.cu at 12 (the pin conflicts from there on), then
    lands the pin's lines in the moved file at 25: `landed`, at 25, not `conflict` at 12."""
    block = ("        case GGML_TYPE_IQ1_M:\n            load_tiles_iq1_m(x, tile);\n"
             "            decode_iq1_m_grid(x, grid);\n            return mmq_iq1_m_enabled();\n")
    feat = MMQ_CU.replace("        case GGML_TYPE_Q4_0:\n", block + "        case GGML_TYPE_Q4_0:\n")
    up = GitRepo(tmp_path / "upstream")
    h = FastHistory()
    marks = {0: h.commit("base", {"src/mmq.cu": MMQ_CU, "src/noise.c": "0\n"})}
    h.tag("b0", marks[0])
    for i in range(1, 41):
        files = {"src/noise.c": f"{i}\n"}
        if i == 12:
            files.update({"src/mmq.cu": None, "src/mmq/tiles.cu": MMQ_CU.replace("should_use", "tiles_use")})
        if i == 25:
            files["src/mmq/tiles.cu"] = feat.replace("should_use", "tiles_use")
        marks[i] = h.commit(f"change {i} (#{100 + i})", files)
    h.tag("bad", marks[40])
    shas = import_history(h, up, marks)
    series(up, shas[0], "feat", {"src/mmq.cu": feat}, tmp_path / "patches")
    cfg = write_pins(tmp_path / "pins.yaml", f"""
        upstream: {up.path}
        builds: [b0, bad]
        pins:
          - id: feat
            patches: patches/feat
        """)
    code, doc = blame_json(cfg, tmp_path, "--good", "b0", "--bad", "bad")
    feat_pin = doc["pins"][0]
    assert code == 1 and feat_pin["bad_status"] == "upstream" and feat_pin["status"] == "upstream"
    assert feat_pin["first_bad"]["commit"] == shas[25], feat_pin["summary"]
    assert "moved code" in feat_pin["detail"] and feat_pin["summary"].startswith("landed upstream in")


def test_pick_says_when_the_pin_that_kept_a_build_out_flips_more_than_once(tmp_path):
    up, cfg, shas = make_world(tmp_path, {10: BROKEN_MMQ, 20: MMQ_CU, 30: BROKEN_MMQ}, 40)
    out = tmp_path / "pick.json"
    assert main(["pick", "-c", str(cfg), "--json", str(out), "--builds", "b0,bad"]) == 0
    doc = json.loads(out.read_text())
    (reason,) = doc["builds"][0]["reasons"]
    assert doc["picked"] == "b0" and reason["upstream_commit"]["commit"] == shas[10]
    assert reason["monotone"] is False and "not monotone" in reason["summary"]
