"""The resolution ledger's file format, matching and recording; the pin set reading around it."""

from __future__ import annotations

import pytest

from pinset.config import ledger
from pinset.config.schema import load_pinset
from pinset.report.markdown import refresh_lines
from pinset.sim.markdown import cell
from pinset.sim.model import BuildResult, PinResult, SimResult
from pinset.sim.modes import direct_mode
from tests.testing import write_pins

MARKED = "a\n<<<<<<< ours\nB1\n=======\nP1\n>>>>>>> theirs\nc\n<<<<<<< ours\n=======\nP2\n>>>>>>> theirs\nd\n"


def test_render_and_parse_round_trip_whatever_the_lines_hold():
    # (marker-like lines in a resolution only where the file itself holds them: leftover_marker)
    hunks = {ledger.Hunk(("=======", "<<<<<<< build"), ("hunk 1: 1 build lines, 1 pin lines, 1 resolved lines",
                                                         ">>>>>>> pin")):
             (">>>>>>> pin", "", "======="), ledger.Hunk((), ("x",)): ()}
    res = ledger.Resolution("0001-a", "src/a.c", hunks)
    back = ledger.parse(ledger.render(res, "two\nlines"))
    assert back.path == "src/a.c" and back.hunks == hunks


@pytest.mark.parametrize("text, where", [
    ("nothing\n", ":1:"), ("path: a\nhunk 1: 1 build lines, 0 pin lines, 0 resolved lines\n<<<<<<< build\n", ":4:"),
    ("path: a\n", ":2: no hunks"), ("path: a\nhunk one\n", ":2:")])
def test_a_damaged_resolution_names_file_and_line(tmp_path, text, where):
    with pytest.raises(ledger.LedgerProblem, match=where):
        ledger.parse(text, tmp_path / "0001-a.txt")


def test_record_then_resolve_gives_the_resolution_and_nothing_is_forced():
    resolved = "a\nB1 and P1\nc\nP2 too\nd\n"
    hunks = ledger.record("f", MARKED, resolved)
    assert hunks == {ledger.Hunk(("B1",), ("P1",)): ("B1 and P1",), ledger.Hunk((), ("P2",)): ("P2 too",)}
    res = ledger.Resolution("0001-f", "f", hunks)
    # The same conflict elsewhere in another text: resolved.
    other = "zz\n" + MARKED.replace("c\n", "c\nmore\n")
    text, used = ledger.resolve("f", other, [res])
    assert used == ["0001-f"] and text == "zz\na\nB1 and P1\nc\nmore\nP2 too\nd\n"
    # One hunk unknown: not resolved; another path: not looked at.
    assert ledger.resolve("f", MARKED.replace("B1", "B9"), [res]) == (None, ["0001-f"])
    assert ledger.resolve("g", MARKED, [res]) == (None, [])


def test_record_refuses_edits_outside_the_hunks():
    assert ledger.record("f", MARKED, "a\nX\nchanged c\nY\nd\n") is None


def test_patches_folder_ignores_the_ledger_and_the_digest_covers_it(make_repo, tmp_path):
    up = make_repo()
    up.commit("base", {"a.txt": "a\n"})
    up.git("checkout", "-q", "-b", "s")
    up.commit("change", {"a.txt": "b\n"})
    folder = tmp_path / "patches" / "p"
    up.format_patch("master..s", folder)
    (folder / "resolutions").mkdir()
    (folder / "resolutions" / "0001-a.txt.txt").write_text("path: a.txt\nhunk 1: 0 build lines, 0 pin lines, 0 resolved lines\n"
                                                          "<<<<<<< build\n=======\n>>>>>>> pin\n")
    cfg = write_pins(tmp_path / "pins.yaml", f"upstream: {up.path}\nbuilds: [b1]\npins:\n  - id: p\n    patches: patches/p\n")
    one = load_pinset(cfg)
    assert [p.name for p in one.pins[0].series] == ["0001-change.patch"]
    digest = one.digest
    (folder / "resolutions" / "0001-a.txt.txt").write_text(
        (folder / "resolutions" / "0001-a.txt.txt").read_text().replace("0 resolved", "1 resolved") + "x\n")
    assert load_pinset(cfg).digest != digest


def test_offset_is_told_from_exact_by_git_apply_v():
    assert direct_mode("Checking patch a.txt...\nApplied patch a.txt cleanly.\n") == "exact"
    assert direct_mode("Checking patch a.txt...\nHunk #1 succeeded at 17 (offset 5 lines).\n") == "offset"
    assert direct_mode("Hunk #2 succeeded at 3 (offset -1 line).\n") == "offset"


def test_grid_and_report_say_resolution_and_refresh():
    assert "applied (recorded resolution 0001-a)" in cell(PinResult("p", "applied", True, resolutions=["0001-a"]))
    sim = SimResult([BuildResult("b1", "c1", [PinResult("p", "applied", True, apply_mode="offset")]),
                     BuildResult("b2", "c2", [PinResult("p", "applied", True, apply_mode="exact",
                                                        resolutions=["0001-a"])])])
    assert refresh_lines(sim) == ["- `p` needs a refresh: applies but not exactly on b1 (offset) "
                                  "(`pinset refresh p --onto BUILD`)", ""]


@pytest.mark.parametrize("marker", ["<<<<<<< ours", "=======", ">>>>>>> theirs", "||||||| base", "<<<<<<<", ">>>>>>> HEAD\r"])
def test_a_resolution_holding_conflict_markers_is_refused_when_recorded_and_read(tmp_path, marker):
    """Trust III: the resolved side of a hunk is the resolved text: a conflict marker there is a leftover."""
    resolved = f"a\nB1\n{marker}\nP1\nc\nP2 too\nd\n"
    with pytest.raises(ledger.LedgerProblem, match="conflict marker"):
        ledger.record("f", MARKED, resolved)
    hunks = {ledger.Hunk(("B1",), ("P1",)): ("B1", marker, "P1")}
    with pytest.raises(ledger.LedgerProblem, match="conflict marker"):
        ledger.render(ledger.Resolution("0001-f", "f", hunks), "c")
    text = ("path: f\nhunk 1: 1 build lines, 1 pin lines, 3 resolved lines\n<<<<<<< build\nB1\n=======\nP1\n"
            f">>>>>>> pin\nB1\n{marker}\nP1\n")
    with pytest.raises(ledger.LedgerProblem, match=r"0001-f.txt:9: .*conflict marker"):
        ledger.parse(text, tmp_path / "0001-f.txt")


def test_marker_like_lines_of_the_file_itself_are_no_leftover():
    """A line the build or the pin holds (an rst underline, a test of git's markers) may stay in a resolution."""
    hunks = {ledger.Hunk(("Title", "======="), ("New title", "=======")): ("New title", "=======")}
    res = ledger.Resolution("0001-f", "f", hunks)
    assert ledger.parse(ledger.render(res, "c")).hunks == hunks
