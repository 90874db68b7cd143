"""Bench statistics on simulated and recorded rounds (scipy.stats underneath)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from pinset.measures.bench import analyse, run_tps
from pinset.measures.stats import (compare, estimate, hodges_lehmann, verdict_for, walsh_averages,
                                   wilcoxon_ci, wilcoxon_p)
from pinset.measures.stats_sim import verdict_rates

FIX = Path(__file__).parent / "fixtures" / "llama-bench"


def test_hodges_lehmann_is_the_median_of_walsh_averages():
    d = np.array([0.1, -0.2, 0.4, 0.0])
    w = walsh_averages(d)
    assert len(w) == 10
    assert hodges_lehmann(d) == pytest.approx(float(np.median(w)))
    assert hodges_lehmann(np.array([1.0, 2.0, 3.0])) == pytest.approx(2.0)


def test_wilcoxon_ci_is_the_acceptance_region_of_scipys_test():
    rng = np.random.default_rng(5)
    d = rng.normal(0.02, 0.01, 10)
    lo, hi = wilcoxon_ci(d)
    assert lo < hodges_lehmann(d) < hi
    eps = 1e-9
    # just inside: scipy's signed-rank test does not reject; just outside: it does
    assert sps.wilcoxon(d - (lo + eps)).pvalue >= 0.05
    assert sps.wilcoxon(d - (hi - eps)).pvalue >= 0.05
    assert sps.wilcoxon(d - (lo - eps)).pvalue < 0.05
    assert sps.wilcoxon(d - (hi + eps)).pvalue < 0.05
    assert lo in walsh_averages(d) and hi in walsh_averages(d)


def test_five_rounds_cannot_reach_95_percent_with_signed_ranks_so_t_is_used():
    d = np.array([0.01, 0.012, 0.008, 0.011, 0.009])
    assert wilcoxon_ci(d) is None
    e = estimate(d)
    assert e.ci_method == "t"
    t = sps.ttest_1samp(d, 0).confidence_interval(0.95)
    assert e.ci_log == pytest.approx((t.low, t.high))
    assert e.p_value == pytest.approx(sps.wilcoxon(d).pvalue)


def test_too_few_rounds_is_insufficient_data():
    assert compare([100.0, 101.0], [99.0, 100.0]).verdict == "insufficient data"
    assert verdict_for(None, 0.01) == "insufficient data"
    assert wilcoxon_p(np.array([0.0, 0.0, 0.0])) is None


def test_verdict_rules():
    thr = math.log(1.01)
    e = estimate(np.array([0.001, -0.002, 0.0015, 0.0, -0.001]))
    assert verdict_for(e, thr) == "no change"
    slow = estimate(np.log(np.array([0.90, 0.91, 0.895, 0.905, 0.9])))
    assert verdict_for(slow, thr) == "slower"
    fast = estimate(np.log(np.array([1.10, 1.11, 1.095, 1.105, 1.1])))
    assert verdict_for(fast, thr) == "faster"
    noisy = estimate(np.log(np.array([0.8, 1.2, 0.9, 1.15, 1.0])))
    assert verdict_for(noisy, thr) == "too noisy"
    # a band wider than 5 % means a noisy machine: a CI inside it is not "no change"
    assert verdict_for(e, math.log(1.08)) == "too noisy"


@pytest.mark.parametrize("rounds,sigma,drift", [(5, 0.002, 0.0), (5, 0.005, 0.0), (5, 0.003, 0.005),
                                                (12, 0.005, 0.0)])
def test_simulated_aa_runs_say_no_change_at_least_95_percent(rounds, sigma, drift):
    rates = verdict_rates(rounds, sigma, 1.0, drift=drift, trials=300, seed=11)
    assert rates.get("no change", 0) >= 0.95, rates
    assert rates.get("faster", 0) + rates.get("slower", 0) <= 0.03, rates


@pytest.mark.parametrize("rounds,sigma,heavy", [(5, 0.005, False), (5, 0.01, False), (5, 0.01, True), (8, 0.01, True)])
def test_simulated_10_percent_slowdown_says_slower(rounds, sigma, heavy):
    rates = verdict_rates(rounds, sigma, 0.9, heavy_tails=heavy, trials=200, seed=12)
    assert rates.get("slower", 0) >= 0.95, rates
    assert rates.get("faster", 0) == 0


def test_noisy_aa_never_claims_a_difference_often():
    rates = verdict_rates(5, 0.02, 1.0, trials=300, seed=13)
    assert rates.get("faster", 0) + rates.get("slower", 0) <= 0.05, rates


def kept_samples_median(doc, label, test_index):
    """What the analysis should use per kept round: the median of the run's -r samples."""
    return [float(np.median(r["runs"][label]["tests"][test_index]["samples_ts"]))
            for r in doc["round_log"] if not r["warmup"]]


def test_recorded_aa_rounds_reanalyse_and_do_not_claim_a_difference():
    """A/A recorded on the shared 2-core CI machine (same binary as base and head): very noisy."""
    doc = json.loads((FIX / "aa-cpu-recorded.json").read_text())
    rows = analyse(doc["round_log"])
    assert [r["test"] for r in rows] == [r["test"] for r in doc["rows"]]
    for i, new in enumerate(rows):
        assert new["base_tps"] == kept_samples_median(doc, "base", i)
        assert new["head_tps"] == kept_samples_median(doc, "head", i)
        assert new["verdict"] in ("no change", "too noisy")
        assert len(new["base_tps"]) == doc["rounds"] - 1  # warm-up dropped
        assert "round 0: warm-up" in new["excluded"]


def test_a_run_is_the_median_of_its_samples_so_the_cuda_graph_warm_up_sample_does_not_count():
    """H200, IQ1_S MoE model, base and head builds (the pin does not touch IQ1_S): in 30 of the 32 pp runs the
    first of the 3 samples is the slowest (CUDA graph capture), often by 20 %; the mean carries it, the median not."""
    doc = json.loads((FIX / "h200-moe-iq1s-recorded.json").read_text())
    pp = [t for r in doc["round_log"] for run in r["runs"].values() for t in run["tests"] if t["test"].startswith("pp")]
    assert sum(t["samples_ts"][0] < min(t["samples_ts"][1:]) for t in pp) == 30 and len(pp) == 32
    t = pp[0]
    assert run_tps(t) == sorted(t["samples_ts"])[1] > t["avg_ts"]
    assert run_tps({"avg_ts": 5.0, "samples_ts": []}) == 5.0  # older llama-bench without samples
    row = analyse(doc["round_log"])[0]
    assert row["test"] == "pp512" and row["base_tps"] == kept_samples_median(doc, "base", 0)


def test_recorded_model_comparison_reanalyses_to_what_the_device_wrote():
    """IQ1_M vs IQ1_S of the same synthetic MoE weights on the head build, H200 (reports/h200/vs-iq1s/)."""
    doc = json.loads((FIX / "h200-moe-iq1m-vs-iq1s.json").read_text())
    assert doc["compare"] == "models" and doc["base"]["model"].endswith("IQ1_S.gguf")
    rows = analyse(doc["round_log"])
    for new, old in zip(rows, doc["rows"], strict=True):
        assert new["base_tps"] == old["base_tps"] and new["head_tps"] == old["head_tps"]
        assert new["ratio"] == pytest.approx(old["ratio"]) and new["verdict"] == old["verdict"]
    pp512 = rows[0]
    assert pp512["test"] == "pp512" and len(pp512["rounds"]) == 12
    assert 0.9 < pp512["ci95"][0] < pp512["ratio"] < pp512["ci95"][1] < 1.1   # IQ1_M within 10 % of IQ1_S


def test_recorded_rounds_with_a_strong_slowdown_injected_say_slower():
    doc = json.loads((FIX / "aa-cpu-recorded.json").read_text())
    for rnd in doc["round_log"]:
        for t in rnd["runs"]["head"]["tests"]:
            t["samples_ts"] = [x * 0.5 for x in t["samples_ts"]]
    rows = analyse(doc["round_log"])
    assert all(r["verdict"] == "slower" for r in rows), [(r["verdict"], r["ci95"]) for r in rows]


def test_busy_and_failed_rounds_are_excluded():
    doc = json.loads((FIX / "aa-cpu-recorded.json").read_text())
    log = doc["round_log"]
    log[1]["other_gpu_processes"] = True
    log[2]["runs"]["head"]["ok"] = False
    log[2]["runs"]["head"]["detail"] = "llama-bench killed by SIGSEGV"
    row = analyse(log)[0]
    assert 1 not in row["rounds"] and 2 not in row["rounds"]
    assert any("another process used the GPU" in e for e in row["excluded"])
    assert any("SIGSEGV" in e for e in row["excluded"])
    assert 1 in analyse(log, keep_busy_rounds=True)[0]["rounds"]
