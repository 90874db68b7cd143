"""The typed round log (pinset.measures.bench_log): what a bench records, what a file holds and what the analysis
and the report read are one form; a file read and written again keeps its round log byte for byte, also keys this
pinset does not name and the order an older file wrote them in."""

from __future__ import annotations

import copy
import json

import pytest

from pinset.errors import PinsetError
from pinset.measures.bench_analysis import analyse_rows
from pinset.measures.bench_log import RoundRecord
from pinset.measures.bench_run import Round, SideRun
from pinset.measures.llama_bench import parse_jsonl
from pinset.results import Doc
from tests.testing import FIXTURES, read_bench, round_log

RECORDED = sorted((FIXTURES / "llama-bench").glob("*.json")) + sorted((FIXTURES / "report").glob("*/bench-*.json"))


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_recorded_round_log_is_written_back_byte_for_byte(path):
    raw = json.loads(path.read_text())["round_log"]
    assert json.dumps([r.to_json() for r in round_log(raw)]) == json.dumps(raw)


def test_keys_this_pinset_does_not_name_and_their_order_are_kept():
    raw = json.loads((FIXTURES / "llama-bench" / "aa-cpu-recorded.json").read_text())["round_log"]
    edited = copy.deepcopy(raw)
    first = edited[1]
    edited[1] = {"note": "cooled down", **{k: first[k] for k in reversed(list(first))}}
    run = edited[1]["runs"]["base"]
    run.pop("detail")
    run["tests"][0] = {"extra": [1, 2], **{k: v for k, v in run["tests"][0].items() if k != "samples_ts"}}
    records = round_log(edited)
    assert json.dumps([r.to_json() for r in records]) == json.dumps(edited)
    assert records[1].rest == {"note": "cooled down"} and records[1].run("base").detail is None
    # read the same as before the edit: the run's speed is its avg_ts without samples
    test = records[1].run("base").tests[0]
    assert test.samples_ts is None and test.tps == raw[1]["runs"]["base"]["tests"][0]["avg_ts"]


def test_a_fresh_round_and_its_recorded_json_analyse_alike():
    lines = parse_jsonl((FIXTURES / "llama-bench" / "cpu-tiny-moe-iq1m.jsonl").read_text())
    rounds = []
    for i in range(5):
        rnd = Round(i, "BH" if i % 2 == 0 else "HB", warmup=i == 0)
        for label in ("base", "head"):
            rnd.runs[label] = SideRun(label, True, lines, None, 1.234)
        rounds.append(rnd.record())
    again = round_log([r.to_json() for r in rounds])
    assert again == rounds
    assert [r.to_json() for r in analyse_rows(again)] == [r.to_json() for r in analyse_rows(rounds)]
    assert again[1].run("head").seconds == 1.23 and again[0].warmup and again[1].order == "HB"


def test_the_report_and_the_bench_count_the_same_failed_runs():
    doc = json.loads((FIXTURES / "llama-bench" / "aa-cpu-recorded.json").read_text())
    doc["round_log"][2]["runs"]["head"].update(ok=False, detail="llama-bench exit 1: boom")
    doc["round_log"][3]["runs"]["base"]["tests"][0]["samples_ts"][0] = 2e7
    result = read_bench(doc)
    test = doc["round_log"][3]["runs"]["base"]["tests"][0]["test"]
    assert result.failed_runs() == ["round 2 head: llama-bench exit 1: boom",
                                    f"round 3 base: {test}: 2e+07 t/s is beyond any physical rate (> 1e+07)"]


def test_a_round_log_entry_of_the_wrong_type_is_refused_naming_the_key():
    raw = json.loads((FIXTURES / "llama-bench" / "aa-cpu-recorded.json").read_text())["round_log"][0]
    with pytest.raises(PinsetError, match=r"round_log\[0\]\.runs\.base\.ok: expected"):
        RoundRecord.from_json(Doc({**raw, "runs": {"base": {**raw["runs"]["base"], "ok": "yes"}}}, "f.json",
                                  "round_log[0]"))


def test_the_stage_runs_from_its_settings_alone_and_records_the_round_log(tmp_path):
    """run_bench takes a BenchSettings (no argparse namespace): what the verb builds from its options."""
    from pinset.measures.bench_log import RoundRecord
    from pinset.measures.bench_run import BenchSettings, run_bench
    from pinset.measures.sides import folder_side
    from tests.testing.fake_llama import FIXTURE_TESTS, fake_bin

    base = folder_side("base", fake_bin(tmp_path / "base", {"pp": 1000.0, "tg": 100.0}, 0.01, 1), None, ["llama-bench"])
    head = folder_side("head", fake_bin(tmp_path / "head", {"pp": 1500.0, "tg": 100.0}, 0.01, 2), None, ["llama-bench"])
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    looks = []
    result = run_bench(base, head, BenchSettings({"base": model, "head": model}, tuple(FIXTURE_TESTS), repetitions=1,
                                                 rounds=4, cpu=True), on_look=looks.append)
    assert [r.round for r in result.round_log] == [0, 1, 2, 3] and all(isinstance(r, RoundRecord) for r in result.round_log)
    assert [look.rounds for look in looks] == [1, 2, 3, 4] and not looks[-1].adaptive
    assert {row.kept for row in result.rows} == {3} and result.to_json()["round_log"] == [r.to_json() for r in result.round_log]
    assert result.decision is not None and not result.decision.adaptive and not result.aa_check
