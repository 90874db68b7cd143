"""From the round log (bench_log.RoundRecord: a bench's own rounds and a recorded file's read alike) to bench rows,
through one tidy pandas table; the bench result; and the domain rules around it: which benches are A/A checks,
whether an A/A file may set a later bench's noise. The rule that makes one row from its speeds is the model's
(bench_model.row_from_speeds), so a row read from a file checks itself without this module.
"""

from __future__ import annotations

import json
import math
import socket
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from pinset.errors import PinsetError
from pinset.measures.bench_log import RoundRecord
from pinset.measures.bench_model import (
    DECISIVE,
    BenchModelFile,
    BenchResult,
    BenchRow,
    BenchSide,
    Exclusion,
    noise_of,
    plan_of,
    row_from_speeds,
)
from pinset.measures.rule import MIN_EFFECT, MIN_ROUNDS, NOISE_K, RULE, Plan
from pinset.measures.sides import Side, same_programs
from pinset.measures.stats import log_ratios
from pinset.result_parts import GpuRecord
from pinset.results import SCHEMAS

MAX_ROUNDS = 40  # default round cap, warm-up included: an A/A row noisier than 1 % needs ~20-30 kept rounds
# Default --max-time: the whole cap for the 48-layer synthetic Qwen3-30B-A3B (`-p 512,2048 -n 128 -r 3`: 15-19 s a
# round on the H200). 300 s allowed 15 rounds there, where an A/A row with a per-round sd >= 1 % said "no change"
# in <= 22 % of simulated benches (benchmarks/bench_rule_sim.py --round-seconds 19 --max-time 300).
MAX_TIME_S = 900.0

METHOD = ("run speed = median of llama-bench's samples; per-round log(head/base), mean effect, t CI at alpha 0.05 "
          "spread over the bench's looks (Bonferroni; one look for a fixed round count), verdict at the first decisive "
          "look; no change = CI inside ±max(1 %, per-round noise sd)")


def _round_exclusion(rnd: RoundRecord, k: tuple, keep_busy_rounds: bool) -> Exclusion | None:
    """Why round `rnd` gives no value for test `k` (None: it does)."""
    if rnd.warmup:
        return Exclusion.warmup(rnd.round)
    if rnd.other_gpu_processes and not keep_busy_rounds:
        return Exclusion.busy(rnd.round)
    for label in ("base", "head"):
        run = rnd.run(label)
        if run is None:
            return Exclusion.failed(rnd.round, label, None)
        match = run.matching(k)
        why = run.detail or ("test missing" if not match else "the test twice" if len(match) > 1 else match[0].problem)
        if not run.ok or why:
            return Exclusion.failed(rnd.round, label, why)
    return None


FRAME_COLUMNS = ["round", "order", "side", "test", "params", "samples", "tps", "kept", "excluded"]


def rounds_frame(rounds: list[RoundRecord], *, keep_busy_rounds: bool = False):
    """The tidy table of a round log (pandas): one line per round, side and test, with the run's speed
    (SpeedRecord.tps) and whether the statistics keep it (else why not, an Exclusion). Rows, the CSV, the tables
    and the report's speeds all come from here."""
    import pandas as pd

    order: list[tuple] = []
    names: dict[tuple, tuple[str, dict]] = {}
    for rnd in rounds:
        for run in (rnd.runs or {}).values():
            for t in run.tests:
                if t.key not in names:
                    names[t.key] = (t.test, t.params)
                    order.append(t.key)
    records = []
    for k in order:
        test, params = names[k]
        for rnd in rounds:
            why = _round_exclusion(rnd, k, keep_busy_rounds)
            for label in ("base", "head"):
                side = rnd.run(label)
                match = side.matching(k) if side else []
                records.append({"round": rnd.round, "order": rnd.order, "side": label, "test": test,
                                "params": json.dumps(params, sort_keys=True),
                                "samples": list(match[0].samples_ts or []) if match else [],
                                "tps": match[0].tps if side and side.ok and len(match) == 1 and not match[0].problem
                                else math.nan,
                                "kept": why is None, "excluded": why})
    return pd.DataFrame.from_records(records, columns=FRAME_COLUMNS)


def write_csv(frame, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    frame.assign(samples=frame["samples"].map(json.dumps)).to_csv(dest, index=False)
    return dest


def rows_from_frame(frame, *, plan: Plan = Plan(), noise: dict[str, float] | None = None) -> list[BenchRow]:
    """Bench rows from rounds_frame(): per test, the kept rounds' speeds and the decision (stats.decide).
    noise: per-round sd of ln(head/base) by test params (json) from an A/A bench of this machine."""
    rows = []
    for params_json in frame["params"].unique():
        sub = frame[frame["params"] == params_json]
        kept = sub[sub["kept"]].pivot(index="round", columns="side", values="tps").sort_index()
        excluded = list(dict.fromkeys(e for e in sub["excluded"] if isinstance(e, Exclusion)))
        base_tps, head_tps = [float(x) for x in kept.get("base", [])], [float(x) for x in kept.get("head", [])]
        rows.append(row_from_speeds(sub["test"].iloc[0], json.loads(params_json), [int(r) for r in kept.index],
                                    base_tps, head_tps, excluded, plan=plan, noise_sd=(noise or {}).get(params_json)))
    return rows


def analyse_rows(rounds: list[RoundRecord], *, keep_busy_rounds: bool = False, plan: Plan = Plan(),
                 noise: dict[str, float] | None = None) -> list[BenchRow]:
    """Bench rows from the round log (a bench's own or a recorded file's: the same records)."""
    return rows_from_frame(rounds_frame(rounds, keep_busy_rounds=keep_busy_rounds), plan=plan, noise=noise)


def decisive(rows: list[BenchRow]) -> bool:
    """Every row has a verdict a sequential bench may stop on."""
    return bool(rows) and all(r.verdict in DECISIVE for r in rows)


def bench_result(models: dict[str, Path], bench_args: list[str], rounds: list[RoundRecord], repetitions: int,
                 base: Side, head: Side, *, keep_busy_rounds: bool = False, decision: dict | None = None,
                 host: dict | None = None, aa: bool | None = None) -> BenchResult:
    """compare "builds" (one model, base vs head build) or "models" (one build, the base side's model as the
    reference); pinset report takes only the first kind. `rounds`: the round log (bench_run.Round.record);
    base/head: the sides with the commits they ran (bench_run resolves a folder's from llama-bench). aa: whether
    head is the base programs themselves (an A/A check: `aa_check` and `aa_noise` recorded); None: not said."""
    model = models["head"]
    compare_models = models["base"] != models["head"]
    decision = decision or decision_record(Plan())
    rows = analyse_rows(rounds, keep_busy_rounds=keep_busy_rounds, plan=plan_of(decision), noise=noise_of(decision))
    decision = {**decision, "more_rounds": more_rounds(rows)}
    snap = next((s for r in rounds for s in (r.gpu_before, r.gpu_after) if s), None)
    extra: dict[str, Any] = {"method": METHOD, "decision": decision, **({"host": host} if host else {}),
             **({"pinset": head.pinset} if head.pinset else {})}
    if aa is not None:   # after the others: the JSON's keys keep their order
        extra["aa_check"] = aa
        if aa:
            extra["aa_noise"] = aa_noise(rows)
    return BenchResult(
        bench_ok(rows, rounds, aa=bool(aa)), "models" if compare_models else "builds", BenchModelFile(str(model), model.name),
        list(bench_args), len(rounds), repetitions, 1,
        BenchSide(base.build, base.commit, models["base"].name), BenchSide(head.build, head.commit, models["head"].name),
        GpuRecord(snap["name"], snap["driver"], keys=("name", "driver")) if snap else None, list(rounds), rows, extra)


def is_aa_check(base: Side, head: Side, *, program: str, aa_flag: bool, compare_models: bool) -> bool:
    """head is the base build itself, recognised by content: --aa, or byte-identical programs (llama-bench and
    the libraries beside it, sides.same_programs) whatever folders were given. Never for a model comparison
    (one build on purpose)."""
    if compare_models:
        return False
    return aa_flag or same_programs(base.bin_dir, head.bin_dir, program)


def decision_record(plan: Plan, *, noise: list[dict] | None = None, noise_from: str | None = None,
                    max_rounds: int | None = None, max_time_s: float | None = None, elapsed_s: float | None = None,
                    budget_ran_out: bool = False) -> dict:
    """The JSON "decision" object: how the verdicts were reached (docs/bench.md)."""
    return {"rule": RULE, "alpha": plan.alpha, "looks": plan.looks, "first_look": plan.first_look,
            "alpha_per_look": plan.alpha_per_look, "margin_min": math.exp(MIN_EFFECT) - 1.0, "noise_k": NOISE_K,
            "noise_from": noise_from, "noise": noise, "adaptive": plan.looks > 1, "max_rounds": max_rounds,
            "max_time_s": max_time_s, "elapsed_s": None if elapsed_s is None else round(elapsed_s, 1),
            "budget_ran_out": budget_ran_out, "more_rounds": None,
            **({"order": "random"} if plan.signs else {})}   # rounds' orders drawn (older files: alternating, no key)


def aa_noise(rows: list[BenchRow]) -> list[dict]:
    """The noise an A/A bench measured, per test, to feed a later bench's margin (--noise-from): the sd of
    ln(head/base) over all its kept rounds (not only up to the deciding look)."""
    return [{"test": r.test, "params": r.params, "rounds": len(r.base_tps),
             "sd": float(np.std(log_ratios(r.base_tps, r.head_tps), ddof=1))}
            for r in rows if len(r.base_tps) >= MIN_ROUNDS]


def more_rounds(rows: list[BenchRow]) -> int | None:
    """The most further rounds any "too noisy" row suggests (None: none is, or none can say)."""
    wanted = [r.more_rounds for r in rows if r.verdict == "too noisy" and r.more_rounds]
    return max(wanted) if wanted else None


def bench_ok(rows: list[BenchRow], rounds: list[RoundRecord], *, aa: bool = False) -> bool:
    """Every run succeeded (with physical speeds, also in a re-analysed file) and every row is "faster" or
    "no change"; for an A/A check (head is base itself) every row is "no change": any other verdict of the same
    programs against themselves is the rule's own false verdict (or a machine too noisy to measure on), red."""
    run_failed = any(r.failed_runs() for r in rounds)
    good = ("no change",) if aa else ("faster", "no change")
    return bool(rows) and not run_failed and all(r.verdict in good for r in rows)


def reanalysed(result: BenchResult, *, keep_busy_rounds: bool = False) -> BenchResult:
    """A recorded bench with its rows recomputed from its round log by this pinset's method: for results written
    before the method changed. The original method is kept under reanalysed_from."""
    decision = result.decision_record or decision_record(Plan())
    plan = plan_of(decision)
    rows = analyse_rows(result.round_log, keep_busy_rounds=keep_busy_rounds, plan=plan, noise=noise_of(decision))
    fresh = decision_record(plan)
    method = {k: fresh[k] for k in ("rule", "alpha", "looks", "first_look", "alpha_per_look", "margin_min", "noise_k")}
    extra = {**result.extra, "method": METHOD, "decision": {**fresh, **decision, **method, "more_rounds": more_rounds(rows)},
             "reanalysed_from": {"method": result.method, "schema": result.schema}}
    return replace(result, ok=bench_ok(rows, result.round_log, aa=bool(result.aa_check)), rows=rows, extra=extra,
                   schema=SCHEMAS["bench"])


# --- --noise-from: an A/A bench of this machine sets a later bench's no-change band ------------------------
@dataclass(frozen=True)
class AaNoise:
    """The per-round noise an A/A bench of this machine measured (noise_from), for a later bench's band."""

    source: str           # the A/A file, as given (recorded as the decision's noise_from)
    entries: list[dict]   # aa_noise() of its rounds: {test, params, rounds, sd}, recorded as the decision's noise

    @property
    def by_params(self) -> dict[str, float]:
        """{params json: sd}, as the analysis takes it (noise_of)."""
        return {json.dumps(e["params"], sort_keys=True): float(e["sd"]) for e in self.entries}


def noise_from(path: Path, bench_args: list[str], *, cpu: bool, model: Path, repetitions: int) -> AaNoise:
    """The A/A noise of `path` for this bench: refused (exit 2) unless it is an A/A bench of this host and GPU,
    on this model, with the same llama-bench options (so the same tests) and -r (a run's speed is the median
    of -r samples: more samples scatter less). The noise is computed from the file's own rounds; its
    `aa_noise` summary must agree with them."""
    from pinset.measures import gpu as gpu_mod
    from pinset.measures.derived import check_derived
    from pinset.results import read_document

    doc, kind, _schema, _raw = read_document(path)
    aa = BenchResult.from_json(doc) if kind == "bench" else None
    if aa is not None:
        check_derived(doc.path, aa)   # as the report reads it: verdicts that follow from the file's own speeds
    if not isinstance(aa, BenchResult) or not aa.aa_check:
        raise PinsetError(f"--noise-from {path}: not an A/A bench (pinset bench --aa)")
    there_host = (aa.extra.get("host") or {}).get("hostname")
    if there_host != socket.gethostname():
        raise PinsetError(f"--noise-from {path}: measured on host {there_host!r}, this is {socket.gethostname()!r}")
    snap = None if cpu else gpu_mod.snapshot()
    here = snap.name if snap else None
    there = aa.gpu.name if aa.gpu else None
    if there != here:
        raise PinsetError(f"--noise-from {path}: measured on {there or 'CPU'}, this machine has {here or 'no GPU'}")
    if list(aa.llama_bench_args) != list(bench_args):
        raise PinsetError(f"--noise-from {path}: llama-bench options {' '.join(aa.llama_bench_args)!r} "
                          f"differ from {' '.join(bench_args)!r} (other tests)")
    there_model = aa.model.name
    if there_model != model.name:
        raise PinsetError(f"--noise-from {path}: measured on the model {there_model}, this bench runs {model.name}")
    if aa.repetitions != repetitions:
        raise PinsetError(f"--noise-from {path}: measured with -r {aa.repetitions}, this bench runs "
                          f"-r {repetitions}")
    entries = aa_noise(analyse_rows(aa.round_log))
    recorded_noise = aa.extra.get("aa_noise")
    if recorded_noise is not None and not _same_noise(recorded_noise, entries):
        raise PinsetError(f"--noise-from {path}: its aa_noise does not match the sd of its own rounds (edited?)")
    if not entries:
        raise PinsetError(f"--noise-from {path}: no test with a measured noise (fewer than 3 kept rounds)")
    return AaNoise(str(path), entries)


def _same_noise(recorded: list[dict], computed: list[dict]) -> bool:
    key = lambda e: json.dumps(e["params"], sort_keys=True)  # noqa: E731
    mine = {key(e): e["sd"] for e in computed}
    return {key(e) for e in recorded} == set(mine) and all(
        math.isclose(e["sd"], mine[key(e)], rel_tol=1e-6, abs_tol=1e-12) for e in recorded)


def runs_in_time_order(rounds: list[RoundRecord], test: str) -> list[float]:
    """Every run's speed of `test` (both sides, the warm-up included) in the order the runs ran: what a regime of
    the machine is read from (stats_sim.spells_from_runs). A run without a speed is left out."""
    frame = rounds_frame(rounds, keep_busy_rounds=True)
    sub = frame[frame["test"] == test]
    out = []
    for rnd in rounds:
        first = "base" if rnd.order == "BH" else "head"
        for side in (first, "head" if first == "base" else "base"):
            tps = sub[(sub["round"] == rnd.round) & (sub["side"] == side)]["tps"]
            out += [float(x) for x in tps if not math.isnan(x)]
    return out
