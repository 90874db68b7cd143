"""Adaptive `pinset bench` end to end with fake llama-bench programs (speeds under the test's control), the
A/A noise feeding a later bench (--noise-from), and the tidy CSV."""

from __future__ import annotations

import csv
import json
import math

import pytest

from pinset.cli import main
from tests.testing.fake_llama import bench, fake_bin


def test_a_3_percent_faster_head_stops_early_with_faster(tmp_path):
    base = fake_bin(tmp_path / "base", {"pp": 1000.0, "tg": 100.0}, 0.005, 1)
    head = fake_bin(tmp_path / "head", {"pp": 1030.0, "tg": 103.0}, 0.005, 2)
    rc, doc = bench(tmp_path, base, head, "--max-rounds", "30")
    assert rc == 0
    assert doc["schema"] == 2 and doc["decision"]["adaptive"] and not doc["decision"]["budget_ran_out"]
    assert {r["verdict"] for r in doc["rows"]} == {"faster"}
    assert 6 <= doc["rounds"] < 30            # a warm-up, at least FIRST_LOOK kept rounds, and it stopped early
    orders = [r["order"] for r in doc["round_log"]]
    assert orders[0] == "BH" and set(orders) <= {"BH", "HB"}   # the warm-up base first, then drawn (round_order)
    assert doc["decision"]["order"] == "random"
    for row in doc["rows"]:
        assert row["ci95"][0] > 1.0 and row["decided_after"] <= doc["rounds"] - 1


def test_identical_sides_stop_with_no_change(tmp_path):
    base = fake_bin(tmp_path / "base", {"pp": 1000.0, "tg": 100.0}, 0.002, 3)
    head = fake_bin(tmp_path / "head", {"pp": 1000.0, "tg": 100.0}, 0.002, 4)
    rc, doc = bench(tmp_path, base, head)
    assert rc == 0
    assert {r["verdict"] for r in doc["rows"]} == {"no change"}
    assert doc["rounds"] < 40
    for row in doc["rows"]:
        assert -0.01 < row["ci95"][0] - 1.0 and row["ci95"][1] - 1.0 < 0.01 and row["aa_spread"] == pytest.approx(0.01)


def test_noisy_sides_hit_the_round_cap_and_say_too_noisy_with_a_suggestion(tmp_path, capsys):
    base = fake_bin(tmp_path / "base", {"pp": 1000.0, "tg": 100.0}, 0.10, 5)
    head = fake_bin(tmp_path / "head", {"pp": 1010.0, "tg": 101.0}, 0.10, 6)
    rc, doc = bench(tmp_path, base, head, "--max-rounds", "8")
    assert rc == 1
    assert doc["rounds"] == 8 and doc["decision"]["budget_ran_out"]
    noisy = [r for r in doc["rows"] if r["verdict"] == "too noisy"]
    assert noisy and all(r["more_rounds"] and r["more_rounds"] > 0 for r in noisy)
    assert doc["decision"]["more_rounds"] == max(r["more_rounds"] for r in noisy)
    err = capsys.readouterr().err
    assert "bench: 8 of 8 rounds" in err and "undecided:" in err


def test_max_time_stops_the_bench(tmp_path):
    base = fake_bin(tmp_path / "base", {"pp": 1000.0, "tg": 100.0}, 0.10, 7)
    head = fake_bin(tmp_path / "head", {"pp": 1000.0, "tg": 100.0}, 0.10, 8)
    rc, doc = bench(tmp_path, base, head, "--max-time", "0.01")
    assert rc == 1 and doc["rounds"] == 1 and doc["decision"]["budget_ran_out"]
    assert {r["verdict"] for r in doc["rows"]} == {"insufficient data"}


def test_fixed_rounds_turn_adaptivity_off(tmp_path):
    base = fake_bin(tmp_path / "base", {"pp": 1000.0, "tg": 100.0}, 0.002, 9)
    head = fake_bin(tmp_path / "head", {"pp": 1000.0, "tg": 100.0}, 0.002, 10)
    rc, doc = bench(tmp_path, base, head, "--rounds", "4")
    assert doc["rounds"] == 4 and doc["decision"]["looks"] == 1 and not doc["decision"]["adaptive"]


def test_aa_noise_feeds_a_later_bench_and_mismatches_are_refused(tmp_path, capsys):
    base = fake_bin(tmp_path / "base", {"pp": 1000.0, "tg": 100.0}, 0.02, 11)
    head = fake_bin(tmp_path / "head", {"pp": 1000.0, "tg": 100.0}, 0.02, 12)
    aa_dir = tmp_path / "aa"
    aa_dir.mkdir()
    rc, aa = bench(aa_dir, base, head, "--aa", "--rounds", "8")
    assert aa["aa_check"] and len(aa["aa_noise"]) == len(aa["rows"]) == 6 and all(e["sd"] > 0 for e in aa["aa_noise"])
    aa_json = aa_dir / "bench.json"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    rc, doc = bench(run_dir, base, head, "--noise-from", str(aa_json), "--rounds", "6")
    assert doc["decision"]["noise_from"] == str(aa_json) and doc["decision"]["noise"] == aa["aa_noise"]
    by_test = {json.dumps(e["params"], sort_keys=True): e["sd"] for e in aa["aa_noise"]}
    for row in doc["rows"]:
        sd = by_test[json.dumps(row["params"], sort_keys=True)]
        assert row["noise_sd"] == sd and row["aa_spread"] == pytest.approx(max(0.01, math.exp(sd) - 1))
    capsys.readouterr()
    # other llama-bench options: other tests
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    argv = ["bench", "--base-bin", str(base), "--head-bin", str(head), "--cpu", "-m", str(model)]
    assert main([*argv, "--noise-from", str(aa_json), "--", "-p", "64"]) == 2
    assert "differ" in capsys.readouterr().err
    # another host
    other = json.loads(aa_json.read_text())
    other["host"]["hostname"] = "elsewhere"
    (tmp_path / "other.json").write_text(json.dumps(other))
    assert main([*argv, "--noise-from", str(tmp_path / "other.json")]) == 2
    assert "measured on host 'elsewhere'" in capsys.readouterr().err
    # not an A/A bench
    assert main([*argv, "--noise-from", str(run_dir / "bench.json")]) == 2
    assert "not an A/A bench" in capsys.readouterr().err


def test_csv_is_the_tidy_round_table(tmp_path):
    base = fake_bin(tmp_path / "base", {"pp": 1000.0, "tg": 100.0}, 0.002, 13)
    head = fake_bin(tmp_path / "head", {"pp": 1000.0, "tg": 100.0}, 0.002, 14)
    rc, doc = bench(tmp_path, base, head, "--rounds", "4", "--csv", str(tmp_path / "rounds.csv"))
    with open(tmp_path / "rounds.csv", newline="") as f:
        lines = list(csv.DictReader(f))
    assert list(lines[0]) == ["round", "order", "side", "test", "params", "samples", "tps", "kept", "excluded"]
    assert len(lines) == 4 * 2 * len(doc["rows"])
    for row in doc["rows"]:
        params = json.dumps(row["params"], sort_keys=True)
        mine = [ln for ln in lines if ln["params"] == params and ln["kept"] == "True"]
        assert [float(ln["tps"]) for ln in mine if ln["side"] == "base"] == row["base_tps"]
        assert [float(ln["tps"]) for ln in mine if ln["side"] == "head"] == row["head_tps"]
        assert all(json.loads(ln["samples"]) for ln in mine)
    warm = [ln for ln in lines if ln["round"] == "0"]
    assert warm and all(ln["kept"] == "False" and ln["excluded"] == "round 0: warm-up" for ln in warm)


def test_a_head_that_keeps_failing_stops_the_adaptive_bench_at_once(tmp_path):
    base = fake_bin(tmp_path / "base", {"pp": 1000.0, "tg": 100.0}, 0.002, 15)
    head = tmp_path / "head"
    head.mkdir()
    (head / "llama-bench").write_text("#!/bin/sh\necho 'main: error: failed to load model' >&2\nexit 1\n")
    (head / "llama-bench").chmod(0o755)
    rc, doc = bench(tmp_path, base, head)
    assert rc == 1 and doc["ok"] is False
    assert doc["rounds"] == 2 and not doc["decision"]["budget_ran_out"]
