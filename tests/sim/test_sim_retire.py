"""A pin is `upstream` (retired) only when its change really is in the build: lines the file (or the
tree) had before the pin are no evidence, and a pin that still applies and changes the build is not
carried. A false `upstream` is a false pass: the pin counts as ok while its change is missing."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from pinset.sim.changes import combine, moved_match, parse_patch, placed_lines, whole_runs
from tests.testing import first_build, git_am_3, write_pins
from tests.testing.sim import by_id, run_sim

FILLER = "".join(f"int filler_{i}(void) {{ return {i}; }}\n" for i in range(30))
BLOCK = "    int value = compute(ready);\n    log_value(value);\n    return value + 1;\n"
MAIN_C = ('#include "common.h"\n#include "values.h"\nint first(int ready) {\n' + BLOCK + "}\n"
          + FILLER + "int second(int ready) {\n    return 0;\n}\n")


def _series(up, base, name, files, out, with_base=False):
    up.git("checkout", "-q", "-b", f"tmp-{name}", base)
    up.commit(name, files)
    up.git("format-patch", "-q", *(["--base", base] if with_base else []), "-o", str(out / name),
           f"{base}..tmp-{name}")
    up.git("checkout", "-q", "master")
    up.git("branch", "-q", "-D", f"tmp-{name}")


def _pins(tmp_path, up, builds, pins, *ids):
    entries = "".join(f"  - id: {i}\n    patches: {pins / i}\n" for i in ids)
    return write_pins(tmp_path / "pins.yaml", f"upstream: {up.path}\nbuilds: [{', '.join(builds)}]\npins:\n{entries}")


def _world(make_repo, tmp_path, with_base=False):
    up, b1 = first_build(make_repo, {"src/main.c": MAIN_C, "README": "upstream\n"})
    pins = tmp_path / "patches"
    # dup-block: the pin gives second() the very body first() has (every added line already in the file).
    dup_block = MAIN_C.replace("int second(int ready) {\n    return 0;\n}\n", "int second(int ready) {\n" + BLOCK + "}\n")
    _series(up, b1, "dup-block", {"src/main.c": dup_block}, pins, with_base)
    # dup-include: the pin adds an #include line the file already has (a merge leftover, say).
    _series(up, b1, "dup-include", {"src/main.c": MAIN_C.replace(
        "int second", '#include "common.h"\nint second')}, pins, with_base)
    # b2: upstream squash-merged dup-block.
    up.commit("squash: dup-block (#7)", {"src/main.c": dup_block})
    up.tag("b2")
    return up, pins, dup_block


def test_pin_adding_lines_the_file_already_has_is_applied_not_upstream(make_repo, tmp_path):
    up, pins, _ = _world(make_repo, tmp_path)
    code, data = run_sim(tmp_path, _pins(tmp_path, up, ["b1"], pins, "dup-block", "dup-include"))
    pins_b1 = by_id(data["builds"][0])
    assert pins_b1["dup-block"]["status"] == "applied", pins_b1["dup-block"]
    # applied and not retired whatever the count says: the series names no base, so the copies the file had
    # before the pin are known only from the patch's context (never from a blob that happens to be cached)
    assert pins_b1["dup-block"]["retire"] is False
    assert pins_b1["dup-include"]["status"] == "applied", pins_b1["dup-include"]
    assert code == 0


def test_squash_merged_duplicate_block_is_still_upstream(make_repo, tmp_path):
    up, pins, _ = _world(make_repo, tmp_path)
    _, data = run_sim(tmp_path, _pins(tmp_path, up, ["b1", "b2"], pins, "dup-block"))
    b1, b2 = (by_id(b)["dup-block"] for b in data["builds"])
    assert b1["status"] == "applied"
    assert b2["status"] == "upstream" and b2["retire"] is True and b2["carried_fraction"] == 1.0


def test_pin_that_still_applies_and_changes_the_build_is_not_carried(make_repo, tmp_path):
    """Upstream put the same lines somewhere else (the count says 'present'), but the pin still
    applies at its own place and changes the build: it is not carried."""
    up, pins, _ = _world(make_repo, tmp_path)
    up.git("checkout", "-q", "-b", "elsewhere", "b1")
    up.commit("upstream: a third copy", {"src/main.c": MAIN_C + "int third(int ready) {\n" + BLOCK + "}\n"})
    up.tag("b3")
    up.git("checkout", "-q", "master")
    _, data = run_sim(tmp_path, _pins(tmp_path, up, ["b3"], pins, "dup-block"))
    pin = by_id(data["builds"][0])["dup-block"]
    assert pin["carried_fraction"] == 1.0
    assert pin["status"] == "applied" and pin["retire"] is False


TARGET = "int fresh(int ready) {\n    return 0;\n}\n" + FILLER


def _copy_block_on_b2(make_repo, tmp_path, b2: dict) -> dict:
    """The pin copy-block (BLOCK into fresh() of src/target.c, on b1) simulated on b2, b1 with files `b2`."""
    up, b1 = first_build(make_repo, {"src/main.c": MAIN_C, "src/target.c": TARGET})
    pins = tmp_path / "patches"
    _series(up, b1, "copy-block", {"src/target.c": TARGET.replace("    return 0;\n", BLOCK)}, pins, with_base=True)
    up.commit("upstream b2", b2)
    up.tag("b2")
    _, data = run_sim(tmp_path, _pins(tmp_path, up, ["b2"], pins, "copy-block"))
    return by_id(data["builds"][0])["copy-block"]


def test_pin_failing_for_another_reason_is_not_retired_by_lines_that_were_already_there(make_repo, tmp_path):
    """The moved-code search must not count lines the tree had before the pin (here the block in
    src/other.c): upstream changed the pin's context (rewrote fresh()), so it conflicts."""
    pin = _copy_block_on_b2(make_repo, tmp_path, {"src/target.c": TARGET.replace("    return 0;\n",
                                                                                 "    return ready ? 2 : 0;\n")})
    assert pin["status"] == "conflict" and pin["retire"] is False, pin
    assert pin["conflict_with"] == "upstream"


def test_pin_landed_in_moved_code_is_still_retired(make_repo, tmp_path):
    """Counterpart of the test above: the block copied into a new file by upstream (beyond the
    copies the base had) still retires the pin that no longer applies."""
    # upstream moves fresh() with the change into src/fresh.c
    pin = _copy_block_on_b2(make_repo, tmp_path, {"src/target.c": FILLER,
                                                  "src/fresh.c": "int fresh(int ready) {\n" + BLOCK + "}\n"})
    assert pin["status"] == "upstream" and pin["retire"] is True, pin


def test_preimage_of_a_series_counts_lines_before_the_series():
    """Context and removed lines bound the file's copies from below; lines an earlier patch of the
    series added are not the file's own."""
    first = ("diff --git a/f.c b/f.c\n--- a/f.c\n+++ b/f.c\n@@ -1,2 +1,3 @@\n int keep_me(void);\n"
             "+int added_line(void);\n-int gone_line(void);\n")
    second = ("diff --git a/f.c b/f.c\n--- a/f.c\n+++ b/f.c\n@@ -1,2 +1,3 @@\n int keep_me(void);\n"
              " int added_line(void);\n+int added_line(void);\n")
    fc = combine([parse_patch(first), parse_patch(second)])["f.c"]
    assert fc.preimage == {"int keep_me(void);": 1, "int gone_line(void);": 1}
    assert fc.net_added() == {"int added_line(void);": 2}


def test_moved_match_counts_only_copies_beyond_the_preimage():
    added = {"line_a();": 1, "line_b();": 1, "line_c();": 1}
    where = {line: {"x.c": 1} for line in added}
    assert moved_match(added, where).carried(0.95)
    assert not moved_match(added, where, {"line_a();": 1, "line_b();": 1, "line_c();": 1}).carried(0.95)
    assert moved_match(added, {line: {"x.c": 2} for line in added}, {line: 1 for line in added}).carried(0.95)


@given(st.dictionaries(st.sampled_from([f"line_{i}();" for i in range(8)]), st.integers(1, 3), min_size=1),
       st.dictionaries(st.sampled_from([f"dir/f{i}.c" for i in range(3)]), st.integers(1, 4), min_size=1))
def test_lines_the_preimage_already_had_never_retire_a_pin(added, counts_per_file):
    """Whatever the tree holds, if the pin's base had as many copies of each line, nothing is found."""
    locations = {line: dict(counts_per_file) for line in added}
    preimage = {line: sum(counts_per_file.values()) for line in added}
    match = moved_match(added, locations, preimage)
    assert match.found == 0 and not match.carried(0.0 + 1e-9)


# --- issue 40: retired only when upstream took the pin, where the pin puts it ----------------------------------

SWITCHES = ("int first(int x) {\n    switch (x) {\n        case 0:\n            return 100;\n        case 9:\n"
            "            return 900;\n        default:\n            return -1;\n    }\n}\n" + FILLER
            + "int second(int x) {\n    switch (x) {\n        case 1:\n        case 2:\n            return 12;\n"
            "        default:\n            return 0;\n    }\n}\n")
# the pin: `case 1:` and `case 2:` join case 0's arm in first(); second() has had both labels all along
LABELS = SWITCHES.replace("        case 0:\n", "        case 0:\n        case 1:\n        case 2:\n", 1)
# upstream: its own label at the very spot, in first() only (the pin conflicts, upstream took nothing)
UPSTREAM_LABEL = SWITCHES.replace("        case 0:\n", "        case 0:\n        case 3:\n", 1)


def _labels_world(make_repo, tmp_path, fork: bool):
    """b1: SWITCHES; the pin `labels` (no base-commit:) made on b1, or with `fork` on a fork's commit that
    upstream never had (its preimage blob is in no history: git am -3 cannot build its fake ancestor); b2:
    upstream's own `case 3:` in first()."""
    up, b1 = first_build(make_repo, {"src/sw.c": SWITCHES, "README": "upstream\n"})
    pins = tmp_path / "patches"
    base = b1
    if fork:
        up.git("checkout", "-q", "-b", "fork", b1)
        base = up.commit("fork: a comment", {"src/sw.c": "/* fork */\n" + SWITCHES})
        _series(up, base, "labels", {"src/sw.c": "/* fork */\n" + LABELS}, pins)
        up.git("checkout", "-q", "master")
        up.git("branch", "-q", "-D", "fork")
        up.git("reflog", "expire", "--expire=now", "--all")
        up.git("gc", "-q", "--prune=now")
    else:
        _series(up, base, "labels", {"src/sw.c": LABELS}, pins)
    up.commit("upstream: case 3 (#12)", {"src/sw.c": UPSTREAM_LABEL})
    up.tag("b2")
    return up, pins


@pytest.mark.parametrize("fork", [False, True], ids=["preimage-in-history", "preimage-nowhere"])
def test_labels_another_switch_had_all_along_are_no_retirement(make_repo, tmp_path, fork):
    """Every line the pin adds occurs in the build ("100% present": second()'s labels), but upstream took
    nothing: git am -3 conflicts, and so must sim, never `upstream` (exit 0, "delete the pin")."""
    up, pins = _labels_world(make_repo, tmp_path, fork)
    truth, _ = git_am_3(up.path, tmp_path / "clone", "b2", [("labels", pins / "labels")])
    assert truth == {"labels": "conflict"}
    code, data = run_sim(tmp_path, _pins(tmp_path, up, ["b1", "b2"], pins, "labels"))
    b1, b2 = (by_id(b)["labels"] for b in data["builds"])
    assert b1["status"] == "applied"
    assert b2["status"] == "conflict" and b2["retire"] is False and b2["conflict_with"] == "upstream", b2
    assert code == 1


def test_labels_upstream_really_took_are_still_retired(make_repo, tmp_path):
    """Counterpart: upstream squash-merged the pin beside its own label (both at the spot): the pin's lines
    are where it puts them, and it is retired (git am -3 fails on it: its context changed)."""
    up, pins = _labels_world(make_repo, tmp_path, fork=False)
    took = UPSTREAM_LABEL.replace("        case 3:\n", "        case 3:\n        case 1:\n        case 2:\n", 1)
    up.commit("squash: labels (#13)", {"src/sw.c": took})
    up.tag("b3")
    code, data = run_sim(tmp_path, _pins(tmp_path, up, ["b3"], pins, "labels"))
    pin = by_id(data["builds"][0])["labels"]
    assert pin["status"] == "upstream" and pin["retire"] is True, pin
    assert code == 0


HELPERS = "".join(f"int helper_{i}(int v) {{ return v * {i}; }}\n" for i in range(12))
TALLY = "int tally(int n) {\n    int total = 0;\n    return total;\n}\n"
# the lines the pin adds to tally(), each in src/other.c since b1, one per function (scattered)
ADDED = ["    total += scale_input(n, 3);", "    total -= clamp_output(total, 40);", "    report_progress(total, n);"]
OTHER = "".join(f"void other_{i}(int n, int total) {{\n{line}\n}}\n" + HELPERS for i, line in enumerate(ADDED))


@pytest.mark.parametrize("other", [OTHER, "void others(int n, int total) {\n" + "\n".join(ADDED) + "\n}\n" + HELPERS],
                         ids=["scattered", "together"])
def test_common_lines_in_another_file_are_no_moved_code(make_repo, tmp_path, other):
    """The moved-code search must not retire a pin whose lines another file has had all along, scattered or
    in one piece: the pin names no base, upstream rewrote tally() (a conflict), and moved nothing."""
    up, b1 = first_build(make_repo, {"src/tally.c": TALLY + HELPERS, "src/other.c": other})
    pins = tmp_path / "patches"
    _series(up, b1, "tally", {"src/tally.c": TALLY.replace("    return total;\n", "\n".join(ADDED)
                                                           + "\n    return total;\n") + HELPERS}, pins)
    up.commit("upstream: tally counts twice (#14)", {"src/tally.c": TALLY.replace("    return total;\n",
                                                                                  "    total = n * 2;\n"
                                                                                  "    return total;\n") + HELPERS})
    up.tag("b2")
    truth, _ = git_am_3(up.path, tmp_path / "clone", "b2", [("tally", pins / "tally")])
    assert truth == {"tally": "conflict"}
    code, data = run_sim(tmp_path, _pins(tmp_path, up, ["b2"], pins, "tally"))
    pin = by_id(data["builds"][0])["tally"]
    assert pin["status"] == "conflict" and pin["retire"] is False and pin["conflict_with"] == "upstream", pin
    assert code == 1


def test_placed_lines_need_the_hunks_own_context_and_whole_runs_need_the_lines_together():
    patch = ("diff --git a/s.c b/s.c\n--- a/s.c\n+++ b/s.c\n@@ -1,4 +1,6 @@\n switch (x) {\n case 0:\n"
             "+case 1:\n+case 2:\n return 100;\n case 9:\n")
    fc = parse_patch(patch)["s.c"]
    took = "switch (x) {\ncase 0:\ncase 1:\ncase 2:\nreturn 100;\ncase 9:\n"
    elsewhere = "switch (x) {\ncase 0:\ncase 3:\nreturn 100;\ncase 9:\n}\nswitch (y) {\ncase 1:\ncase 2:\nreturn 12;\n"
    assert placed_lines(fc, took) == {"case 1:": 1, "case 2:": 1}
    assert placed_lines(fc, elsewhere) == {}
    run = ("diff --git a/t.c b/t.c\n--- a/t.c\n+++ b/t.c\n@@ -1,2 +1,5 @@\n int t(void) {\n"
           "+int alpha = one();\n+int beta = two();\n+int gamma = three();\n }\n")
    fc = parse_patch(run)["t.c"]
    together = "void moved(void) {\n  int alpha = one();\n  int beta = two();\n  int gamma = three();\n}\n"
    scattered = "int alpha = one();\nx();\nint beta = two();\ny();\nint gamma = three();\n"
    assert whole_runs(fc, together) == {"int alpha = one();": 1, "int beta = two();": 1, "int gamma = three();": 1}
    assert whole_runs(fc, scattered) == {}
