"""#20 §2, the report side: every verdict a result states is re-derived from the numbers in the same file with
the producer's own rule (pinset/measures/derived.py), and a sim without a result for a pin is missing evidence.
Each case is a recorded file edited by hand, as a hostile or careless user would."""

from __future__ import annotations

import copy

from pinset.measures.derived import kld_contradiction
from pinset.report.load import load_result
from tests.report.test_report import FIX, GREEN
from tests.testing.report import dump, load, report

GREEN_KLD = FIX / "green" / "kld-h200.json"
GREEN_BENCH = FIX / "green" / "bench-h200.json"
ADAPTIVE = FIX.parent / "llama-bench" / "h200-48l-adaptive-head-vs-base.json"
PINS = FIX / "pins" / "pins.yaml"


def _others(skip: str):
    return [p for p in GREEN if p.name != skip]


def test_kld_verdict_contradicting_its_runs_is_refused(tmp_path, capsys):
    doc = load(GREEN_KLD)
    head = next(r for r in doc["runs"] if r["label"] == "head")
    head["kld"]["mean"] = 0.0050    # 0.0050 - 0.004418 = 5.8e-4, > 2 sigma: "further", the verdict still "as close"
    edited = dump(tmp_path / "kld.json", doc)
    rc, md = report([*_others(GREEN_KLD.name), edited, "-c", PINS], tmp_path)
    err = capsys.readouterr().err
    assert rc == 2 and md is None, err
    assert "kld.json: kld.verdict: verdict 'as close to the CPU result as base'" in err
    assert "'further from the CPU result than base'" in err and len(err.splitlines()) == 1


def test_recorded_kld_verdicts_follow_from_their_runs():
    for path in [GREEN_KLD, FIX / "blocked" / "kld-h200.json", *sorted((FIX / "h200").glob("kld-*.json"))]:
        assert kld_contradiction(load_result(path).model) is None, path


def test_bench_row_whose_speeds_contradict_its_ratio_is_refused(tmp_path, capsys):
    doc = load(ADAPTIVE)
    row = doc["rows"][2]              # tg128 "faster" 1.0099x: head made 20 % slower, the ratio and verdict kept
    row["head_tps"] = [x * 0.8 for x in row["head_tps"]]
    edited = dump(tmp_path / "bench.json", doc)
    rc, md = report([*_others(GREEN_BENCH.name), edited], tmp_path)
    err = capsys.readouterr().err
    assert rc == 2 and md is None, err
    assert 'bench.json: bench.rows[2]: recorded "faster", but its 8 kept rounds give "slower"' in err


def test_bench_row_with_a_ratio_its_speeds_do_not_give_is_refused(tmp_path, capsys):
    doc = load(ADAPTIVE)
    doc["rows"][0]["head_tps"] = [x * 1.001 for x in doc["rows"][0]["head_tps"]]   # still "faster", ratio off
    rc, md = report([dump(tmp_path / "bench.json", doc)], tmp_path)
    err = capsys.readouterr().err
    assert rc == 2 and "bench.rows[0]: recorded ratio 4.065376636666343 but its kept speeds give" in err


def test_bench_verdict_on_too_few_kept_rounds_is_refused(tmp_path, capsys):
    doc = load(GREEN_BENCH)           # schema 1: its rule is not re-run, the count of kept rounds is checked
    row = doc["rows"][1]
    row["base_tps"], row["head_tps"] = row["base_tps"][:2], row["head_tps"][:2]
    rc, md = report([*_others(GREEN_BENCH.name), dump(tmp_path / "bench.json", doc), "-c", PINS], tmp_path)
    err = capsys.readouterr().err
    assert rc == 2 and md is None
    assert "bench.rows[1]: verdict 'no change' on 2 kept rounds (the rule needs at least 3)" in err


def test_bench_unequal_speeds_are_refused(tmp_path, capsys):
    doc = load(GREEN_BENCH)
    doc["rows"][0]["head_tps"].pop()
    rc, _ = report([dump(tmp_path / "bench.json", doc)], tmp_path)
    assert rc == 2 and "bench.rows[0]: 4 base speeds but 3 head speeds" in capsys.readouterr().err


def test_recorded_bench_files_are_consistent():
    for path in [GREEN_BENCH, ADAPTIVE, *sorted((FIX.parent / "llama-bench").glob("*.json"))]:
        load_result(path)   # raises on a contradiction


def _sim_without(pin: str, build_index: int, tmp_path):
    doc = load(FIX / "green" / "sim.json")
    build = doc["builds"][build_index]
    build["pins"] = [p for p in build["pins"] if p["id"] != pin]
    return dump(tmp_path / "sim.json", doc)


def test_sim_lacking_a_pin_of_the_pin_set_is_missing_evidence(tmp_path):
    edited = _sim_without("argsort-block-size", 1, tmp_path)
    rc, md = report([*_others("sim.json"), edited, "-c", PINS], tmp_path)
    assert rc == 1
    headline = md.splitlines()[3]
    assert headline.startswith("**⏳ not enough evidence:**"), headline
    assert "pypi:llama-cpp-python==0.3.35: no sim result for pin `argsort-block-size`" in headline


def test_sim_lacking_a_pin_another_build_has_is_missing_evidence_without_config(tmp_path):
    edited = _sim_without("cuda-mmq-iq1m", 0, tmp_path)
    rc, md = report([*_others("sim.json"), edited], tmp_path)
    assert rc == 1
    assert "pypi:llama-cpp-python==0.3.36: no sim result for pin `cuda-mmq-iq1m`" in md


def test_unedited_green_stays_ready(tmp_path):
    rc, md = report([*GREEN, "-c", PINS], tmp_path)
    assert rc == 0 and "ready to ship" in md.splitlines()[3]
    assert copy.deepcopy(load(GREEN_KLD)) == load(GREEN_KLD)
