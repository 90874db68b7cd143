"""The report works on the result models (#22): merged results are model objects, each model answers what
merging compares (cells, build commits, pin states), and the not-tested list is typed items written to text
in one place. Inputs are the recorded report fixtures, edited where a test needs another answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinset.cells import SAYS_NOTHING
from pinset.errors import PinsetError
from pinset.measures.bench_model import BenchResult, BenchRow
from pinset.measures.kld_model import KldResult, KldRun
from pinset.nightly.model import NOT_TRIED, BlameResult, PickResult
from pinset.report import build_report
from pinset.report.load import load_result, load_results
from pinset.report.merge import merge
from pinset.report.model import Untested, grouped
from pinset.sim.model import SimResult
from pinset.verify.model import NOT_RUN, PASSED, BuildVerification, VerifyResult
from tests import regen_report_goldens as goldens

FIX = goldens.FIXTURES


def dump(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def test_merged_holds_the_models():
    m = merge(load_results(sorted((FIX / "green").glob("*.json"))))
    assert isinstance(m.sim, SimResult) and m.sim.builds
    assert m.verify and all(isinstance(r.build, BuildVerification) for r in m.verify)
    assert m.kld and all(isinstance(s.result, KldResult) and all(isinstance(r, KldRun) for r in s.runs) for s in m.kld)
    assert m.bench and all(isinstance(s.result, BenchResult) and all(isinstance(r, BenchRow) for r in s.rows)
                           for s in m.bench)
    m = merge(load_results(sorted((FIX / "nightly").glob("*.json"))))
    assert isinstance(m.pick, PickResult)
    assert m.blame and all(isinstance(b, BlameResult) for b in m.blame)


def test_every_model_answers_the_merge_questions():
    """No per-kind table in the report: each kind's model yields its cells, build commits and pin states."""
    paths = [*sorted((FIX / "green").glob("*.json")), FIX / "nightly" / "pick.json", FIX / "nightly" / "blame.json"]
    kinds = set()
    for path in paths:
        model = load_result(path).model
        cells = list(model.cells())
        assert cells and all(isinstance(key, tuple) and key[0] == load_result(path).kind for key, _ in cells), path
        assert all(build and commit for build, commit in model.build_commits()), path
        list(model.pin_states())
        kinds.add(load_result(path).kind)
    assert kinds == {"sim", "verify", "kld", "bench", "pick", "blame"}


def test_a_run_gate_wins_over_not_run_and_no_input_is_changed(tmp_path):
    d = load(FIX / "green" / "verify-h200.json")
    build = d["builds"][0]["build"]
    gate = next(g for g in d["builds"][0]["gates"] if g["name"] == "test-chat")
    gate.update(status=NOT_RUN, detail="not run: gate cuda-build failed", seconds=0.0)
    stopped = dump(tmp_path / "stopped.json", d)
    files = load_results([stopped, FIX / "green" / "verify-h200.json"])
    stopped_model = next(f.model for f in files if f.path == stopped)
    assert isinstance(stopped_model, VerifyResult)
    cell = next(v for k, v in stopped_model.cells() if k[1] == build and k[3] == "test-chat" and len(k) == 4)
    assert cell is SAYS_NOTHING

    m = merge(files)
    run = next(r for r in m.verify if r.build.build == build)
    assert run.build.gate("test-chat").status == PASSED
    assert len(run.sources) == 2
    assert run.ok is False          # one file called the build not ok: merging never undoes that
    assert stopped_model.builds[0].gate("test-chat").status == NOT_RUN   # the file's model is untouched


def test_a_tried_pick_row_beats_not_tried_in_either_order(tmp_path):
    d = load(FIX / "nightly" / "pick.json")
    row = next(b for b in d["builds"] if b["verdict"] == NOT_TRIED)
    row.update(verdict="not green", commit="f" * 40, reasons=[])
    # the row first: this file sorts after the recorded one (merge's fixed order), whose row is "not tried"
    d["builds"] = [row] + [b for b in d["builds"] if b is not row]
    tried = dump(tmp_path / "tried.json", d)
    for order in ([FIX / "nightly" / "pick.json", tried], [tried, FIX / "nightly" / "pick.json"]):
        pick = merge(load_results(order)).pick
        assert pick is not None
        assert next(b for b in pick.builds if b.build == row["build"]).verdict == "not green"


def test_two_different_cells_name_both_files(tmp_path):
    d = load(FIX / "green" / "bench-h200.json")
    other = dump(tmp_path / "other.json", {**d, "rows": [{**d["rows"][0], "head_tps": [x * 1.5 for x in d["rows"][0]["head_tps"]]}]})
    with pytest.raises(PinsetError, match=r"bench-h200\.json and .*other\.json disagree on bench / |"
                                          r"other\.json and .*bench-h200\.json disagree on bench / "):
        merge([load_result(FIX / "green" / "bench-h200.json"), load_result(other)])


def test_a_copied_file_is_one_input(tmp_path):
    copy = tmp_path / "copy.json"
    copy.write_bytes((FIX / "green" / "sim.json").read_bytes())
    once, twice = load_result(FIX / "green" / "sim.json"), load_result(copy)
    assert once.canonical == twice.canonical and once.data == once.model.to_json()
    assert len(merge([once, twice]).files) == 1


def test_untested_text_and_grouping():
    items = [Untested("gate `x` not run", "", ("b1",)), Untested("gate `x` not run", "", ("b2",)),
             Untested("gate `x` not run", "", ("b1",)), Untested("Pin set", "not simulated (no sim result)")]
    assert [i.text() for i in grouped(items)] == ["gate `x` not run (b1, b2)", "Pin set: not simulated (no sim result)"]
    assert Untested("`p` has no feature check", "declared unchecked", ("b1",)).text() == \
        "`p` has no feature check: declared unchecked (b1)"


@pytest.mark.parametrize("scenario", goldens.scenarios())
def test_the_json_not_tested_list_is_the_items_text(scenario, tmp_path):
    paths = sorted((FIX / scenario).glob("*.json"))
    report = build_report(paths)
    assert all(isinstance(item, Untested) for item in report.verdict.not_tested)
    assert report.to_json()["verdict"]["not_tested"] == [item.text() for item in report.verdict.not_tested]
    assert all(f"- {item.text()}" in report.markdown for item in report.verdict.not_tested)


def test_report_result_lives_in_its_model_module():
    """Read from pinset.report.model, where it is defined: pinset.report re-exports none of the model's names."""
    import pinset.report
    import pinset.report.model

    assert pinset.report.model.ReportResult.__module__ == "pinset.report.model"
    assert pinset.report.__all__ == ["Report", "build_report", "post_report"]
