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
