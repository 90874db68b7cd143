"""`pinset sim` on real git repositories made in temp dirs."""

from __future__ import annotations

import json

import pytest

from pinset.cli import main
from tests.testing import first_build, series, write_pins
from tests.testing.sim import by_id, run_sim

FILLER = "".join(f"int filler_{i}(void) {{ return {i}; }}\n" for i in range(30))
TYPES_H = """\
enum ggml_type {
    GGML_TYPE_F32 = 0,
    GGML_TYPE_F16 = 1,
    GGML_TYPE_Q4_0 = 2,
    GGML_TYPE_COUNT,
};
""" + FILLER
MMQ_CU = """\
#include "types.h"
bool ggml_cuda_should_use_mmq(enum ggml_type type) {
    switch (type) {
        case GGML_TYPE_Q4_0:
            return true;
        default:
            return false;
    }
}
""" + FILLER


@pytest.fixture
def world(make_repo, tmp_path):
    """An upstream with tags b1..b3 and patch-series pins that cover every status."""
    up, b1 = first_build(make_repo, {"src/types.h": TYPES_H, "src/mmq.cu": MMQ_CU, "README": "upstream\n"})
    pins = tmp_path / "patches"
    # feat-iq1m: adds a type and its MMQ case (our feature, with feature symbols).
    series(up, b1, [("add IQ1_M", {
        "src/types.h": TYPES_H.replace("GGML_TYPE_COUNT", "GGML_TYPE_IQ1_M = 3,\n    GGML_TYPE_COUNT"),
        "src/mmq.cu": MMQ_CU.replace("        case GGML_TYPE_Q4_0:\n",
                                     "        case GGML_TYPE_Q4_0:\n        case GGML_TYPE_IQ1_M:\n"),
    }), ("add loader", {"src/iq1m.cu": "void load_tiles_iq1_m(const void * x, int * tile) {\n    tile[0] = decode_iq1_m_grid(x);\n}\n"})],
        pins / "feat-iq1m")
    # readme-note: touches only README; later upstream squash-merges it (b3).
    series(up, b1, [("docs", {"README": "upstream\nThe pinned build carries extra MMQ types for 1-bit quants.\n"})],
           pins / "readme-note")
    # rival: changes the very line feat-iq1m changes (pin-vs-pin conflict).
    series(up, b1, [("rival", {"src/types.h": TYPES_H.replace("GGML_TYPE_COUNT", "GGML_TYPE_Q1_0 = 3,\n    GGML_TYPE_COUNT")})],
           pins / "rival")
    # b2: upstream edits the MMQ switch where feat-iq1m inserts its case -> upstream conflict on b2.
    up.commit("upstream mmq change", {"src/mmq.cu": MMQ_CU.replace(
        "        case GGML_TYPE_Q4_0:\n            return true;\n",
        "        case GGML_TYPE_Q4_0:\n            return ggml_cuda_mmq_enabled();\n")})
    up.tag("b2")
    # b3 (from b1): upstream squash-merged readme-note (plus an unrelated line).
    up.git("checkout", "-q", "-b", "side", "b1")
    up.commit("squash: readme note (#12)", {"README": "upstream\nThe pinned build carries extra MMQ types for 1-bit quants.\nSee docs.\n"})
    up.tag("b3")
    up.git("checkout", "-q", "master")
    return up, pins


def on_top_of_feat(up, pins) -> str:
    """A branch `stack` = b1 + the feat-iq1m series (git am); returns its head."""
    up.git("checkout", "-q", "-b", "stack", "b1")
    for patch in sorted((pins / "feat-iq1m").iterdir()):
        up.git("am", "-q", str(patch))
    return up.head()


def pin_set(tmp_path, up, builds, pins, *ids, optional=()):
    """pins.yaml for `up` with the given builds and patch-series pins (id, or (id, folder))."""
    entries = ""
    for pin in ids:
        pin_id, folder = pin if isinstance(pin, tuple) else (pin, pin)
        entries += f"  - id: {pin_id}\n    patches: {pins / folder}\n"
        entries += "    required: false\n" if pin_id in optional else ""
    return write_pins(tmp_path / "pins.yaml",
                      f"upstream: {up.path}\nbuilds: [{', '.join(builds)}]\npins:\n{entries}")


def test_clean_pins_apply_with_intact_contracts(world, tmp_path):
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b1"], pins, "feat-iq1m", "readme-note")
    code, data = run_sim(tmp_path, cfg)
    assert code == 0 and data["ok"] is True
    b1 = data["builds"][0]
    assert b1["commit"] == up.git("rev-parse", "b1").strip()
    pins_ = by_id(b1)
    assert pins_["feat-iq1m"]["status"] == "applied"
    assert pins_["feat-iq1m"]["files"] == ["src/iq1m.cu", "src/mmq.cu", "src/types.h"]
    assert pins_["feat-iq1m"]["contract"] == {"ok": True, "problems": []}
    assert pins_["readme-note"]["status"] == "applied" and pins_["readme-note"]["retire"] is False


def test_conflict_with_upstream_and_keep_going(world, tmp_path):
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b1", "b2"], pins, "feat-iq1m", "readme-note")
    code, data = run_sim(tmp_path, cfg)
    assert code == 1 and data["ok"] is False
    b1, b2 = data["builds"]
    assert b1["ok"] is True and b2["ok"] is False
    feat = by_id(b2)["feat-iq1m"]
    assert feat["status"] == "conflict"
    assert feat["conflict_with"] == "upstream"
    assert feat["files"] == ["src/mmq.cu"]
    assert feat["detail"].startswith("0001-add-IQ1_M.patch: ") and "src/mmq.cu" in feat["detail"]
    assert feat["contract"]["ok"] is False and "src/mmq.cu" in feat["contract"]["problems"][0]
    # The failing pin is left out and the next one is still applied.
    assert by_id(b2)["readme-note"]["status"] == "applied"


def test_conflict_attributed_to_earlier_pin(world, tmp_path):
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b1"], pins, "readme-note", "feat-iq1m", "rival")
    code, data = run_sim(tmp_path, cfg)
    assert code == 1
    rival = by_id(data["builds"][0])["rival"]
    assert rival["status"] == "conflict"
    assert rival["conflict_with"] == "feat-iq1m"
    assert rival["files"] == ["src/types.h"]


def test_optional_pin_failure_does_not_fail_the_build(world, tmp_path):
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b1"], pins, "feat-iq1m", "rival", optional=("rival",))
    code, data = run_sim(tmp_path, cfg)
    assert code == 0 and data["ok"] is True
    rival = by_id(data["builds"][0])["rival"]
    assert rival["status"] == "conflict" and rival["required"] is False


def test_squash_merged_pin_is_upstream_and_retired(world, tmp_path):
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b1", "b3"], pins, "readme-note")
    code, data = run_sim(tmp_path, cfg)
    assert code == 0
    b1, b3 = data["builds"]
    assert by_id(b1)["readme-note"]["status"] == "applied"
    note = by_id(b3)["readme-note"]
    assert note["status"] == "upstream" and note["retire"] is True
    assert note["carried_fraction"] == 1.0


def test_clobbered_contract_detected_even_when_merges_are_clean(world, tmp_path):
    up, pins = world
    # 'cleanup' is made on top of feat-iq1m and silently drops its MMQ case: every apply is clean.
    stacked = on_top_of_feat(up, pins)
    series(up, stacked, [("cleanup", {"src/mmq.cu": MMQ_CU.replace("#include \"types.h\"\n", "#include \"types.h\"\nstatic int mmq_cleaned_up = 1;\n")})], pins / "cleanup")
    cfg = pin_set(tmp_path, up, ["b1"], pins, "feat-iq1m", "cleanup")
    code, data = run_sim(tmp_path, cfg)
    assert code == 1
    pins_ = by_id(data["builds"][0])
    assert pins_["cleanup"]["status"] == "applied"
    feat = pins_["feat-iq1m"]
    assert feat["status"] == "applied" and feat["contract"]["ok"] is False
    problems = "\n".join(feat["contract"]["problems"])
    assert "src/mmq.cu: 1 of 1 added lines gone" in problems
    assert "src/mmq.cu: feature symbol GGML_TYPE_IQ1_M no longer present (touched later by: cleanup)" in problems


def test_deleted_new_file_breaks_contract(world, tmp_path):
    up, pins = world
    series(up, on_top_of_feat(up, pins), [("drop loader", {"src/iq1m.cu": None})], pins / "drop")
    cfg = pin_set(tmp_path, up, ["b1"], pins, "feat-iq1m", "drop")
    code, data = run_sim(tmp_path, cfg)
    assert code == 1
    problems = by_id(data["builds"][0])["feat-iq1m"]["contract"]["problems"]
    assert "src/iq1m.cu: file added by this pin is missing (touched later by: drop)" in problems


def test_pr_pin_contributes_only_its_own_diff(make_repo, tmp_path):
    """A PR branched off an old master and merged master midway: only the PR's changes are pinned."""
    up = make_repo("upstream")
    up.commit("base", {"src/types.h": TYPES_H, "src/mmq.cu": MMQ_CU, "docs/a.md": "a\n"})
    fork = up.head()
    up.commit("upstream docs", {"docs/a.md": "a\nb\n"})
    mid = up.head()
    up.git("checkout", "-q", "-b", "pr", fork)
    up.commit("pr part 1", {"src/types.h": TYPES_H.replace("GGML_TYPE_COUNT", "GGML_TYPE_IQ1_M = 3,\n    GGML_TYPE_COUNT")})
    up.git("merge", "-q", "--no-edit", mid)
    pr_head = up.commit("pr part 2", {"src/extra.c": "int iq1m_extra(void) { return 1; }\n"})
    up.git("update-ref", "refs/pull/42/head", pr_head)
    up.git("checkout", "-q", "master")
    up.commit("upstream later", {"docs/a.md": "a\nb\nc\n", "src/late.c": "int late(void) { return 2; }\n"})
    up.tag("b9")
    cfg = write_pins(tmp_path / "pins.yaml", f"""
        upstream: {up.path}
        builds: [b9]
        pins:
          - id: ggml-org#42
            pr: https://github.com/ggml-org/llama.cpp/pull/42
            commit: {pr_head}
    """)
    code, data = run_sim(tmp_path, cfg)
    assert code == 0, data
    pin = by_id(data["builds"][0])["ggml-org#42"]
    assert pin["status"] == "applied"
    # Not docs/a.md (upstream history the PR merged), not src/late.c (upstream after the fork).
    assert pin["files"] == ["src/extra.c", "src/types.h"]


def test_pr_pin_merged_upstream_is_retired(make_repo, tmp_path):
    up = make_repo("upstream")
    up.commit("base", {"src/types.h": TYPES_H})
    fork = up.head()
    up.git("checkout", "-q", "-b", "pr", fork)
    pr_head = up.commit("pr", {"src/types.h": TYPES_H.replace("GGML_TYPE_COUNT", "GGML_TYPE_IQ1_M = 3,\n    GGML_TYPE_COUNT")})
    up.git("update-ref", "refs/pull/7/head", pr_head)
    up.git("checkout", "-q", "master")
    up.tag("before")
    up.git("merge", "-q", "--no-ff", "--no-edit", "pr")
    up.tag("after")
    cfg = write_pins(tmp_path / "pins.yaml", f"""
        upstream: {up.path}
        builds: [before, after]
        pins:
          - id: ggml-org#7
            pr: https://github.com/ggml-org/llama.cpp/pull/7
            commit: {pr_head}
    """)
    code, data = run_sim(tmp_path, cfg)
    assert code == 0
    before, after = (by_id(b)["ggml-org#7"] for b in data["builds"])
    assert before["status"] == "applied" and before["files"] == ["src/types.h"]
    assert after["status"] == "upstream" and after["retire"] is True


def test_user_checkout_is_never_touched(world, tmp_path):
    up, pins = world
    (up.path / "README").write_text("local edit\n")  # uncommitted work in the user's checkout
    before = (up.git("status", "--porcelain"), up.git("show-ref"), up.head(), up.git("stash", "list"))
    cfg = pin_set(tmp_path, up, ["b1", "b2"], pins, "feat-iq1m")
    run_sim(tmp_path, cfg)
    assert (up.git("status", "--porcelain"), up.git("show-ref"), up.head(), up.git("stash", "list")) == before
    assert (up.path / "README").read_text() == "local edit\n"


def test_apply_materialises_merged_tree(world, tmp_path, capsys):
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b1"], pins, "feat-iq1m")
    out = tmp_path / "tree"
    assert main(["apply", "-c", str(cfg), "--build", "b1", "--out", str(out)]) == 0
    assert "case GGML_TYPE_IQ1_M:" in (out / "src/mmq.cu").read_text()
    assert (out / "src/iq1m.cu").exists()
    # A non-empty destination is refused and left as it was.
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep").write_text("x")
    assert main(["apply", "-c", str(cfg), "--build", "b1", "--out", str(tmp_path / "busy")]) == 2
    assert sorted(p.name for p in (tmp_path / "busy").iterdir()) == ["keep"]
    assert "not an empty folder" in capsys.readouterr().err


def test_markdown_grid(world, tmp_path):
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b1", "b2"], pins, "feat-iq1m")
    md = tmp_path / "sim.md"
    assert main(["sim", "-c", str(cfg), "--markdown", str(md)]) == 1
    text = md.read_text()
    assert "| `feat-iq1m` | ✅ applied | ❌ conflict with `upstream` |" in text


def test_duplicate_pin_is_skipped(world, tmp_path):
    up, pins = world
    cfg = pin_set(tmp_path, up, ["b1"], pins, "readme-note", ("readme-note-again", "readme-note"))
    code, data = run_sim(tmp_path, cfg)
    again = by_id(data["builds"][0])["readme-note-again"]
    assert again["status"] == "skipped" and again["detail"] == "no change on top of the earlier pins"
    assert by_id(data["builds"][0])["readme-note"]["status"] == "applied"
    assert code == 1  # a required pin that adds nothing is not ok: the set has a redundant entry


def test_renaming_pin_applies_and_keeps_its_contract(world, tmp_path):
    up, pins = world
    up.git("checkout", "-q", "-b", "mv", "b1")
    up.git("mv", "src/types.h", "src/ggml-types.h")
    up.commit("rename types.h")
    up.git("format-patch", "-q", "-M", "-o", str(pins / "rename"), "b1..mv")
    up.git("checkout", "-q", "master")
    assert "rename from src/types.h" in next((pins / "rename").iterdir()).read_text()
    cfg = pin_set(tmp_path, up, ["b1"], pins, "rename", "readme-note")
    code, data = run_sim(tmp_path, cfg)
    assert code == 0, data
    out = tmp_path / "tree"
    assert main(["apply", "-c", str(cfg), "--build", "b1", "--out", str(out)]) == 0
    assert (out / "src/ggml-types.h").read_text() == TYPES_H and not (out / "src/types.h").exists()
    assert (out / "src/mmq.cu").read_text() == MMQ_CU  # untouched files come through from the build


def test_conflict_names_the_failed_hunk_in_console_json_and_markdown(world, tmp_path, capsys):
    up, pins = world
    # Without its `index` lines the patch has no preimage for a 3-way merge (b2's history has it: with them,
    # as `git am -3`, this is a 3-way merge conflict): the hunk that does not apply is the answer.
    bare = tmp_path / "bare" / "feat-iq1m"
    bare.mkdir(parents=True)
    for patch in (pins / "feat-iq1m").glob("*.patch"):
        (bare / patch.name).write_text("".join(line for line in patch.read_text().splitlines(True)
                                               if not line.startswith("index ")))
    pins = bare.parent
    cfg = pin_set(tmp_path, up, ["b2"], pins, "feat-iq1m")
    md = tmp_path / "sim.md"
    code, data = run_sim(tmp_path, cfg, "--markdown", str(md))
    console = capsys.readouterr().out
    pin = by_id(data["builds"][0])["feat-iq1m"]
    assert code == 1 and pin["status"] == "conflict" and pin["files"] == ["src/mmq.cu"]
    reason = "0001-add-IQ1_M.patch: patch failed: src/mmq.cu:2 at hunk @@ -2,6 +2,7 @@"
    assert pin["detail"] == reason
    assert pin["hunk"][:5] == ["@@ -2,6 +2,7 @@", " bool ggml_cuda_should_use_mmq(enum ggml_type type) {",
                               "     switch (type) {", "         case GGML_TYPE_Q4_0:",
                               "+        case GGML_TYPE_IQ1_M:"]
    assert len(pin["hunk"]) == 1 + 7   # the whole hunk (6 old lines + 1 added), no longer its first 4 lines
    assert reason in console.replace("\n", "") and "+        case GGML_TYPE_IQ1_M:" in console
    text = md.read_text()
    assert f"- **b2** `feat-iq1m`: {reason}\n\n  The pin wants:\n\n  ```diff\n  @@ -2,6 +2,7 @@\n   bool" in text
    assert "lacks the necessary blob" not in console + text + json.dumps(data)
