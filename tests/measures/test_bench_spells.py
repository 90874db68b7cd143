"""The bench under noise that comes in spells (issue 40, class 8). On an H100 the base's pp512 switched between
~1,300 and ~1,750 t/s for a few runs at a time (tests/fixtures/llama-bench/h100-spells/: an A/A and the head-vs-base
bench, with their round logs); with the rounds' order alternating (BH, HB, ...) spells lined up with it and an A/A
said "faster" +17.6 %, `--aa` exiting 0. Now each round's order is drawn at random, a "faster"/"slower" within the
sides' own swings needs the rounds' signs too (stats.beyond_swings), an A/A row that is not "no change" makes the
A/A red, and the report shows an A/A beside the head-vs-base bench of the same cell."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from pinset.cli import main
from pinset.measures import bench_run
from pinset.measures.bench_analysis import runs_in_time_order
from pinset.measures.bench_model import BenchResult
from pinset.measures.stats import Plan, decide, sign_flip_p
from pinset.measures.stats_sim import SPELLS_H100, spell_trials, spells_from_runs
from pinset.results import read_document
from tests.testing import FIXTURES
from tests.testing.fake_llama import FIXTURE_TESTS

H100 = FIXTURES / "llama-bench" / "h100-spells"


def _bench(name: str) -> BenchResult:
    doc, kind, _, _ = read_document(H100 / name)
    assert kind == "bench"
    return BenchResult.from_json(doc)


def test_the_simulated_regime_is_the_recorded_h100_one():
    """SPELLS_H100 (dwell times, levels, within-level sd) is what the recorded A/A's pp512 runs give."""
    speeds = runs_in_time_order(_bench("bench-aa-run2.json").round_log, "pp512")
    assert len(speeds) == 40
    assert spells_from_runs(speeds) == SPELLS_H100
    assert 1.25 < SPELLS_H100.level_ratio < 1.35   # ~1,300 and ~1,750 t/s


@pytest.mark.parametrize("scale", [1, 2, 4, 8])
def test_an_a_a_in_spells_says_no_change_but_rarely_anything_else(scale):
    """The <= 2 % false-verdict promise with the regime's dwell times as recorded and stretched 2-8 times."""
    rates, _ = spell_trials(1.0, max_kept=39, scale=scale, order="random", trials=300, seed=21 + scale)
    assert rates.get("faster", 0) + rates.get("slower", 0) <= 0.02, rates
    assert rates.get("no change", 0) >= 0.95, rates


def test_with_the_order_alternating_spells_fool_the_rule():
    """What the draw prevents (the simulation has teeth): spells of two runs line up with BH, HB, BH, ... and the
    rule as it ran before (no signs to ask) breaks its promise."""
    rates, _ = spell_trials(1.0, max_kept=39, scale=2, order="alternate", trials=300, seed=5)
    assert rates.get("faster", 0) + rates.get("slower", 0) > 0.04, rates


def test_a_real_change_in_spells_is_still_found():
    rates, used = spell_trials(1.5, max_kept=39, scale=1, trials=200, seed=3)
    assert rates.get("faster", 0) >= 0.98 and np.median(used) <= 12   # within the swings: the signs need 11


def test_the_h100_head_vs_base_stays_faster_on_its_five_rounds():
    hb = _bench("bench-hb.json")
    from pinset.measures.bench_analysis import reanalysed

    rows = {r.test: r for r in reanalysed(hb).rows}
    assert rows["pp512"].verdict == "faster" and rows["pp512"].decided_after == 5
    assert rows["pp512"].base_tps[0] == 1267.26 and round(float(np.median(rows["pp512"].head_tps))) == 7639


def test_a_spell_lined_up_with_the_rounds_is_too_noisy_until_the_signs_decide():
    """d of +0.26 for 6 rounds in a row, each side steady within its level (head fast, base slow): within the
    base's own swing (it has been at both levels) the t interval alone no longer decides."""
    base = np.log([1300, 1310, 1290, 1750, 1305, 1295, 1300])
    head = np.log([1740, 1755, 1745, 1760, 1750, 1748, 1752])
    d = head - base
    plan = Plan.adaptive(39, 5, signs=True)
    assert decide(d, Plan.adaptive(39, 5)).verdict == "faster"        # the t rule alone (orders alternating)
    assert decide(d, plan).verdict == "faster"                          # (no sides known: the t rule alone)
    assert decide(d, plan, sides=(base, head)).verdict == "too noisy"
    assert sign_flip_p(np.ones(11)) < plan.alpha_per_look < sign_flip_p(np.ones(10))


SPELL_FAKE = """#!{python}
# A fake llama-bench on a machine in spells: every run (this program, whichever side) counts itself in a file
# beside it; runs 1-2 of every 4 are fast (x1.35), the others slow: lined up with BH, HB, BH, ... head is fast.
import json, sys
from pathlib import Path
count = Path(__file__).parent / "count"
n = int(count.read_text()) if count.exists() else 0
count.write_text(str(n + 1))
fast = ((n + 1) // 2) % 2 == 1
for line in {lines!r}:
    d = json.loads(line)
    speed = (1350.0 if fast else 1000.0) * (1.0 + 0.001 * (n % 3))
    d["samples_ts"] = [speed] * int(sys.argv[sys.argv.index("-r") + 1])
    d["avg_ts"] = speed
    print(json.dumps(d))
"""


def _spell_bin(folder: Path) -> Path:
    folder.mkdir(parents=True)
    lines = (FIXTURES / "llama-bench" / "cpu-tiny-moe-iq1m.jsonl").read_text().splitlines()
    exe = folder / "llama-bench"
    exe.write_text(SPELL_FAKE.format(python=sys.executable, lines=lines))
    exe.chmod(0o755)
    return folder


def _aa(tmp_path, *extra):
    programs = _spell_bin(tmp_path / "bin")
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    out = tmp_path / "aa.json"
    rc = main(["bench", "--base-bin", str(programs), "--head-bin", str(programs), "--aa", "--cpu", "-m", str(model),
               "-r", "1", "--json", str(out), *extra, "--", *FIXTURE_TESTS])
    return rc, json.loads(out.read_text())


def test_an_a_a_that_is_not_no_change_is_red(tmp_path, monkeypatch):
    """The order alternating as before (round_order replaced): spells line up, a row says "faster"; the A/A is
    red (exit 1, ok false), not the exit 0 / ok true the H100 gave."""
    monkeypatch.setattr(bench_run, "round_order", lambda i, draw: "BH" if i % 2 == 0 else "HB")
    rc, doc = _aa(tmp_path, "--rounds", "9")
    verdicts = {r["verdict"] for r in doc["rows"]}
    assert verdicts - {"no change"}, verdicts
    assert doc["aa_check"] is True and doc["ok"] is False and rc == 1


def test_with_orders_drawn_the_same_machine_s_a_a_says_no_change(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_run.random, "SystemRandom", lambda: random.Random(11))   # a fixed draw: no flake
    rc, doc = _aa(tmp_path, "--max-rounds", "40")
    assert {r["verdict"] for r in doc["rows"]} == {"no change"}, [(r["test"], r["verdict"]) for r in doc["rows"]]
    assert rc == 0 and doc["ok"] is True and doc["decision"]["order"] == "random"
    orders = [r["order"] for r in doc["round_log"]]
    assert orders[0] == "BH" and {"BH", "HB"} == set(orders[1:])


def test_reanalysing_an_a_a_that_claims_a_change_is_red(tmp_path):
    """An A/A file whose head ran 20 % faster in every round (as a spell lined up would): its rows say so, and the
    A/A is red, exit 1, whether made so or re-analysed."""
    from pinset.measures.bench_analysis import reanalysed

    raw = json.loads((H100 / "bench-aa-run2.json").read_text())
    for rnd in raw["round_log"]:
        for t in rnd["runs"]["head"]["tests"]:
            t["samples_ts"] = [x * 1.2 for x in t["samples_ts"]]
            t["avg_ts"] *= 1.2
    stale = tmp_path / "stale.json"
    stale.write_text(json.dumps(raw))
    doc, _, _, _ = read_document(stale)
    made = reanalysed(BenchResult.from_json(doc))   # its rows from its own (edited) rounds
    assert made.aa_check and not made.ok
    edited = tmp_path / "aa-head-faster.json"
    edited.write_text(json.dumps(made.to_json()))
    rc = main(["bench", "--reanalyse", str(edited), "--json", str(tmp_path / "out.json")])
    doc = json.loads((tmp_path / "out.json").read_text())
    assert {r["verdict"] for r in doc["rows"]} != {"no change"}
    assert rc == 1 and doc["ok"] is False


def test_the_report_shows_an_a_a_beside_the_head_vs_base_bench_of_the_same_cell(tmp_path):
    rc = main(["report", str(H100 / "bench-hb.json"), str(H100 / "bench-aa-run2.json"),
               "--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md")])
    assert rc != 2
    md = (tmp_path / "r.md").read_text()
    assert "A/A check: base against itself" in md and "pp512 5.652× (faster)" in md and "0.983× (no change)" in md
