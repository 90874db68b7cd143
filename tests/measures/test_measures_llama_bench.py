"""llama-bench -o jsonl parser on real output captured from the CPU build (tests/fixtures/README-llama-bench.md)."""

from __future__ import annotations

import pytest

from pinset.errors import BenchParseError
from pinset.measures.llama_bench import parse_jsonl, test_name as name_of
from tests.testing import FIXTURES

FIX = FIXTURES / "llama-bench"


def test_parse_captured_jsonl():
    lines = parse_jsonl((FIX / "cpu-tiny-moe-iq1m.jsonl").read_text())
    assert [l.test for l in lines] == ["pp64", "pp128", "tg16", "pp64", "pp128", "tg16"]
    assert [l.params["n_ubatch"] for l in lines] == [64, 64, 64, 128, 128, 128]
    first = lines[0]
    assert first.avg_ts == pytest.approx(126.975303)
    assert first.samples_ts == (126.998, 126.953)
    assert first.params["n_batch"] == 128 and first.params["n_gpu_layers"] == 0
    assert first.backends == "CPU" and first.build_commit == "unknown"
    assert first.model_type.startswith("qwen3moe") and "IQ1_M" in first.model_type
    # distinct tests have distinct keys; the same test parsed twice has the same key
    assert len({l.key for l in lines}) == 6
    again = parse_jsonl((FIX / "cpu-tiny-moe-iq1m.jsonl").read_text())
    assert [l.key for l in again] == [l.key for l in lines]


def test_failed_run_prints_nothing_on_stdout():
    assert parse_jsonl((FIX / "missing-model.stdout").read_text()) == []
    assert "failed to load model" in (FIX / "missing-model.stderr").read_text()


def test_broken_line_is_an_error():
    text = (FIX / "cpu-tiny-moe-iq1m.jsonl").read_text().splitlines()[0]
    with pytest.raises(BenchParseError):
        parse_jsonl(text[:-10])


def test_names_follow_llama_bench():
    assert name_of(512, 0) == "pp512"
    assert name_of(0, 128) == "tg128"
    assert name_of(512, 128) == "pp512+tg128"
    assert name_of(512, 0, 4096) == "pp512 @ d4096"


@pytest.mark.parametrize("args, wanted", [
    ([], {(512, 0), (0, 128)}),                                   # llama-bench's defaults
    (["-p", "512"], {(512, 0), (0, 128)}),                        # -n not given: tg128 still runs
    (["-n", "0"], {(512, 0)}),
    (["-p", "512,2048", "-n", "128"], {(512, 0), (2048, 0), (0, 128)}),
    (["-p", "0", "-pg", "512,128"], {(0, 128), (512, 128)}),
    (["-p", "1-512*2"], {(0, 128)}),                               # a range: its tests are not told
    (["-p", "1-512*2", "-n", "1-4+1"], None),
])
def test_the_requested_tests_include_llama_benchs_defaults(args, wanted):
    from pinset.measures.llama_bench import requested_grid

    assert requested_grid(args)[0] == wanted


def test_a_run_without_the_default_tg128_is_not_the_measurement_asked_for():
    from pinset.measures.llama_bench import run_problem

    lines = [line for line in parse_jsonl((FIX / "cpu-tiny-moe-iq1m.jsonl").read_text()) if line.params["n_prompt"] == 64]
    problem = run_problem(lines, repetitions=2, bench_args=["-p", "64", "-ub", "64,128", "-b", "128"])
    assert problem and "no result for tg128" in problem
