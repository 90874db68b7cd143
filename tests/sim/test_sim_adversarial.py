"""`pinset sim` on patches that are easy to get wrong: offsets, files that already exist, binary
files, CRLF files, a series whose order matters (real git repositories in temp dirs)."""

from __future__ import annotations

import json

import pytest

from pinset.cli import main
from tests.sim.test_sim import FILLER, MMQ_CU
from tests.testing import one_pin_yaml, series, write_pins
from tests.testing.sim import by_id, run_sim


@pytest.fixture
def up(make_repo):
    repo = make_repo("upstream")
    repo.commit("base", {"src/mmq.cu": MMQ_CU, "src/a.c": FILLER, "README": "upstream\n"})
    repo.tag("b1")
    return repo


def one_pin(tmp_path, up, builds, folder):
    return write_pins(tmp_path / "pins.yaml",
                      f"upstream: {up.path}\nbuilds: [{', '.join(builds)}]\npins:\n  - id: p\n    patches: {folder}\n")


def sim_pin(tmp_path, cfg, build):
    code, doc = run_sim(tmp_path, cfg)
    return code, by_id(next(b for b in doc["builds"] if b["build"] == build))["p"]


def test_a_patch_creating_a_file_upstream_already_has_with_other_text_is_a_conflict(tmp_path, up):
    b1 = up.head()
    series(up, b1, [("new file", {"src/new.c": "int new_feature(void) { return 1; }\n"})], tmp_path / "p")
    up.commit("upstream adds the same path", {"src/new.c": "int other_thing(void) { return 2; }\n"})
    up.tag("b2")
    code, pin = sim_pin(tmp_path, one_pin(tmp_path, up, ["b2"], tmp_path / "p"), "b2")
    assert code == 1 and pin["status"] == "conflict" and pin["files"] == ["src/new.c"]


def test_a_conflict_writes_nothing_into_the_current_folder(tmp_path, up, monkeypatch):
    """git apply --3way writes an add/add conflict's file into its work tree even with --cached: sim run from
    the user's checkout must neither write there nor read it (a file of that name there must not change the
    answer)."""
    b1 = up.head()
    series(up, b1, [("new file", {"src/new.c": "int new_feature(void) { return 1; }\n"})], tmp_path / "p")
    up.commit("upstream adds the same path", {"src/new.c": "int other_thing(void) { return 2; }\n"})
    up.tag("b2")
    cfg = one_pin(tmp_path, up, ["b2"], tmp_path / "p")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    monkeypatch.chdir(checkout)
    code, pin = sim_pin(tmp_path, cfg, "b2")
    assert code == 1 and pin["status"] == "conflict" and pin["files"] == ["src/new.c"]
    assert list(checkout.iterdir()) == []
    (checkout / "src").mkdir()
    (checkout / "src" / "new.c").write_text("the user's own file\n")
    code, again = sim_pin(tmp_path, cfg, "b2")
    assert (code, again["status"], again["files"]) == (1, "conflict", ["src/new.c"])
    assert (checkout / "src" / "new.c").read_text() == "the user's own file\n"


def test_a_commit_message_quoting_binary_files_differ_is_no_binary_change(tmp_path, up):
    """Only the diff says whether a binary file lacks its data: a message that quotes git's line is a message."""
    b1 = up.head()
    message = "explain the old diff\n\nBinary files a/model.bin and b/model.bin differ\n\nwas all git said."
    series(up, b1, [(message, {"src/a.c": FILLER.replace("return 20;", "return 2000;")})], tmp_path / "p")
    code, pin = sim_pin(tmp_path, one_pin(tmp_path, up, ["b1"], tmp_path / "p"), "b1")
    assert code == 0 and pin["status"] == "applied", pin


def test_a_patch_applying_at_an_offset_is_applied_with_its_lines_in_place(tmp_path, up):
    b1 = up.head()
    series(up, b1, [("edit", {"src/a.c": FILLER.replace("return 20;", "return 2000;")})], tmp_path / "p")
    up.commit("upstream adds lines on top", {"src/a.c": "".join(f"int top_{i};\n" for i in range(40)) + FILLER})
    up.tag("b2")
    code, pin = sim_pin(tmp_path, one_pin(tmp_path, up, ["b2"], tmp_path / "p"), "b2")
    assert code == 0 and pin["status"] == "applied" and pin["contract"]["ok"]


def binary_pin(tmp_path, up, patch):
    """The pin p on b1: a commit adding model.bin (1 KiB of every byte value) on a branch `bin` from b1, its
    patch the text `patch(b1)` (in tmp_path/p). -> pins.yaml."""
    b1 = up.head()
    up.git("checkout", "-q", "-b", "bin", b1)
    (up.path / "model.bin").write_bytes(bytes(range(256)) * 4)
    up.git("add", "model.bin")
    up.git("commit", "-q", "-m", "binary")
    out = tmp_path / "p"
    out.mkdir()
    (out / "0001-binary.patch").write_text(patch(b1))
    up.git("checkout", "-q", "master")
    return one_pin(tmp_path, up, ["b1"], out)


def test_a_binary_patch_without_its_data_is_not_green(tmp_path, up):
    """`git diff` without --binary writes only "Binary files ... differ": nothing to apply, never applied."""
    header = "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] binary\n\n---\n"
    cfg = binary_pin(tmp_path, up, lambda b1: header + up.git("diff", f"{b1}..bin"))
    code, pin = sim_pin(tmp_path, cfg, "b1")
    assert code == 1 and pin["status"] == "error" and pin["conflict_with"] is None
    assert "binary change of model.bin without its data" in pin["detail"]


def test_a_binary_patch_with_full_index_applies(tmp_path, up):
    cfg = binary_pin(tmp_path, up, lambda b1: up.git("format-patch", "--binary", "--stdout", f"{b1}..bin"))
    code, pin = sim_pin(tmp_path, cfg, "b1")
    assert code == 0 and pin["status"] == "applied" and pin["contract"]["ok"]


def test_crlf_file(tmp_path, up):
    crlf = "".join(f"int crlf_{i}(void) {{ return {i}; }}\r\n" for i in range(20))
    b1 = up.commit("crlf", {"src/w.c": crlf})
    up.tag("b0")
    series(up, b1, [("edit", {"src/w.c": crlf.replace("return 7;", "return 700;")})], tmp_path / "p")
    code, pin = sim_pin(tmp_path, one_pin(tmp_path, up, ["b0"], tmp_path / "p"), "b0")
    assert code == 0 and pin["status"] == "applied" and pin["contract"]["ok"]


def test_a_series_whose_second_patch_edits_the_first_ones_lines(tmp_path, up):
    b1 = up.head()
    series(up, b1, [("add", {"src/a.c": FILLER + "int feature_x(void) { return 1; }\n"}),
                    ("change", {"src/a.c": FILLER + "int feature_x(void) { return 2; }\n"})], tmp_path / "p")
    code, pin = sim_pin(tmp_path, one_pin(tmp_path, up, ["b1"], tmp_path / "p"), "b1")
    assert code == 0 and pin["status"] == "applied" and pin["contract"]["ok"]


def test_a_pr_pin_whose_commit_upstream_does_not_have_is_an_error_not_green(tmp_path, up):
    cfg = one_pin_yaml(tmp_path / "pins.yaml", up.path, "gone", pr="https://github.com/ggml-org/llama.cpp/pull/4321",
                       commit="ab" * 20)
    code, doc = run_sim(tmp_path, cfg)
    pin = by_id(doc["builds"][0])["gone"]
    assert code == 1 and pin["status"] == "error" and "not found" in pin["detail"] and not doc["ok"]
    out = tmp_path / "pick.json"
    assert main(["pick", "-c", str(cfg), "--json", str(out)]) == 1
    (reason,) = json.loads(out.read_text())["builds"][0]["reasons"]
    assert reason["status"] == "error" and "not found" in reason["summary"]


def rename_pin(tmp_path, up) -> None:
    """The pin p (in tmp_path/p): src/a.c renamed to src/b.c, on a branch `ren` from b1."""
    b1 = up.head()
    up.git("checkout", "-q", "-b", "ren", b1)
    up.git("mv", "src/a.c", "src/b.c")
    up.git("commit", "-q", "-m", "rename")
    up.format_patch(f"{b1}..ren", tmp_path / "p")
    up.git("checkout", "-q", "master")


def test_a_rename_upstream_already_made_is_upstream_not_a_conflict(tmp_path, up):
    rename_pin(tmp_path, up)
    up.git("merge", "-q", "--ff-only", "ren")
    up.tag("b2")
    code, pin = sim_pin(tmp_path, one_pin(tmp_path, up, ["b1", "b2"], tmp_path / "p"), "b2")
    assert pin["status"] == "upstream", pin


def test_a_rename_whose_source_upstream_deleted_is_a_conflict_not_upstream(tmp_path, up):
    rename_pin(tmp_path, up)
    up.commit("upstream drops a.c", {"src/a.c": None})
    up.tag("b2")
    code, pin = sim_pin(tmp_path, one_pin(tmp_path, up, ["b2"], tmp_path / "p"), "b2")
    assert code == 1 and pin["status"] == "conflict"


def test_a_file_deletion_upstream_already_made_is_upstream(tmp_path, up):
    b1 = up.head()
    series(up, b1, [("drop README", {"README": None})], tmp_path / "p")
    up.commit("upstream drops README too", {"README": None})
    up.tag("b2")
    code, pin = sim_pin(tmp_path, one_pin(tmp_path, up, ["b1", "b2"], tmp_path / "p"), "b2")
    assert code == 0 and pin["status"] == "upstream" and pin["retire"]
