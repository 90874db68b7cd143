"""Interleaved llama-bench rounds for base and head, and their analysis into bench rows.

Round r runs both binaries back to back, base first on even rounds (BH) and head first on odd ones
(HB), so slow drift and "second run is warmer" effects cancel in the per-round ratio. Round 0 is a
warm-up (clocks ramp, page cache fills) and is recorded but never used. Rounds where another process
used the GPU, or where a run failed, are excluded from the statistics and listed.

A run's speed is the median of llama-bench's per-repetition samples, not its avg_ts: on CUDA the
first repetition of a test still captures the CUDA graphs and is usually the slowest, often by ~20 %
(H200, pp runs of a MoE model, 30 of 32: tests/fixtures/llama-bench/h200-moe-iq1s-recorded.json), and a
mean over `-r 3` carries that warm-up into every round.

The two sides are normally two builds on one model (base vs head). With `models`, the comparison
is two models on one build (e.g. IQ1_M vs IQ1_S of the same weights on the head build): the same
rounds and statistics, with "base" the reference model.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

import numpy as np

from pinset import runner
from pinset.checks.machine import read_host
from pinset.checks.nvidia_smi import gpu_order_env
from pinset.markdown_table import table
from pinset.measures import gpu as gpu_mod
from pinset.measures.llama_bench import BenchLine, BenchParseError, parse_jsonl, run_problem, speed_problem
from pinset.measures.sides import Side
from pinset.measures.stats import MIN_EFFECT, MIN_ROUNDS, NOISE_K, RULE, Plan, compare
from pinset.results import SCHEMAS, Doc

CPU_ENV = {"CUDA_VISIBLE_DEVICES": ""}
FIRST_LOOK = 5   # kept rounds before an adaptive bench may stop
MAX_ROUNDS = 40  # default round cap, warm-up included: an A/A row noisier than 1 % needs ~20-30 kept rounds
# Default --max-time: the whole cap for the 48-layer synthetic Qwen3-30B-A3B (`-p 512,2048 -n 128 -r 3`: 15-19 s a
# round on the H200). 300 s allowed 15 rounds there, where an A/A row with a per-round sd >= 1 % said "no change"
# in <= 22 % of simulated benches (benchmarks/bench_rule_sim.py --round-seconds 19 --max-time 300).
MAX_TIME_S = 900.0
VERDICTS = ("faster", "slower", "no change", "too noisy", "insufficient data")
BUSY = "another process used the GPU"   # the one exclusion for noise; warm-up and failed runs are not noise


@dataclass
class SideRun:
    label: str
    ok: bool
    lines: list[BenchLine]
    detail: str | None
    seconds: float


@dataclass
class Round:
    index: int
    order: str                      # "BH" | "HB"
    warmup: bool
    runs: dict[str, SideRun] = field(default_factory=dict)
    gpu_before: gpu_mod.GpuSnapshot | None = None
    gpu_after: gpu_mod.GpuSnapshot | None = None

    @property
    def other_gpu_processes(self) -> bool | None:
        snaps = [s for s in (self.gpu_before, self.gpu_after) if s is not None]
        if not snaps:
            return None
        return any(s.other_processes for s in snaps)

    def to_json(self) -> dict:
        clock = self.gpu_after.sm_clock_mhz if self.gpu_after else (self.gpu_before.sm_clock_mhz if self.gpu_before else None)
        return {
            "round": self.index, "order": self.order, "warmup": self.warmup, "gpu_clock_mhz": clock,
            "other_gpu_processes": self.other_gpu_processes,
            "gpu_before": self.gpu_before.to_json() if self.gpu_before else None,
            "gpu_after": self.gpu_after.to_json() if self.gpu_after else None,
            "runs": {label: {"ok": r.ok, "detail": r.detail, "seconds": round(r.seconds, 2),
                             "tests": [{"test": line.test, "params": line.params, "avg_ts": line.avg_ts,
                                        "stddev_ts": line.stddev_ts, "samples_ts": list(line.samples_ts)}
                                       for line in r.lines]}
                     for label, r in self.runs.items()},
        }


def run_tps(test: dict) -> float:
    """The speed of one run of one test (a recorded test dict): the median of its samples."""
    samples = test.get("samples_ts") or []
    return float(median(samples)) if samples else float(test["avg_ts"])


def recorded_speed_problem(test: dict) -> str | None:
    """Why a recorded test (round_log, possibly from an older or edited file) has no usable speed."""
    samples = test.get("samples_ts") or []
    if not isinstance(samples, list):
        return f"samples_ts {samples!r} is not a list"
    for value in samples or [test.get("avg_ts")]:
        if problem := speed_problem(value):
            return problem
    return None


def run_side(side: Side, model: Path, bench_args: list[str], repetitions: int, *, cpu: bool,
             log: Path | None = None, timeout: float = 1800) -> tuple[SideRun, runner.Completed]:
    argv = [side.exe("llama-bench"), "-m", model, "-o", "jsonl", "-r", str(repetitions), *bench_args]
    done = runner.run(argv, env=CPU_ENV if cpu else gpu_order_env(), timeout=timeout, log=log)
    lines, detail = [], None
    try:
        lines = parse_jsonl(done.stdout)
    except BenchParseError as exc:
        detail = f"unreadable llama-bench output: {exc}"
    if not done.ok:
        detail = f"llama-bench {done.describe()}: {done.tail(3)}"
    elif detail is None:
        detail = run_problem(lines, repetitions=repetitions, bench_args=bench_args, gpu=not cpu)
    return SideRun(side.label, detail is None, lines, detail, done.seconds), done


def run_rounds(base: Side, head: Side, models: dict[str, Path], bench_args: list[str], *, rounds: int,
               repetitions: int, cpu: bool, log_dir: Path | None = None, on_round=None, done=None) -> list[Round]:
    """models: the GGUF each side runs ({"base": ..., "head": ...}; the same file for a build comparison).
    rounds: the most rounds to run; done(rounds so far) -> True stops after a round (adaptive benches)."""
    sides = {"base": base, "head": head}
    out = []
    tests: list[str] | None = None   # the tests of the first good run: every other run must have the same
    for i in range(rounds):
        order = "BH" if i % 2 == 0 else "HB"
        rnd = Round(i, order, warmup=(i == 0))
        rnd.gpu_before = None if cpu else gpu_mod.snapshot()
        for letter in order:
            label = "base" if letter == "B" else "head"
            log = (log_dir / f"bench-round{i}-{label}.log") if log_dir else None
            run, _ = run_side(sides[label], models[label], bench_args, repetitions, cpu=cpu, log=log)
            if run.ok:
                tests = tests if tests is not None else sorted(line.test for line in run.lines)
                if sorted(line.test for line in run.lines) != tests:
                    run.ok, run.detail = False, (f"tests {', '.join(sorted(l.test for l in run.lines))} differ from "
                                                 f"the other runs' {', '.join(tests)}")
            rnd.runs[label] = run
        rnd.gpu_after = None if cpu else gpu_mod.snapshot()
        out.append(rnd)
        if on_round:
            on_round(rnd)
        if done and done(out):
            break
    return out


def _key(params: dict) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


def _round_exclusion(rnd: dict, k: tuple, keep_busy_rounds: bool) -> str | None:
    """Why round `rnd` gives no value for test `k` (None: it does)."""
    if rnd["warmup"]:
        return f"round {rnd['round']}: warm-up"
    if rnd.get("other_gpu_processes") and not keep_busy_rounds:
        return f"round {rnd['round']}: {BUSY}"
    for label in ("base", "head"):
        run = (rnd.get("runs") or {}).get(label)
        match = [t for t in (run or {}).get("tests", []) if _key(t["params"]) == k]
        why = (run or {}).get("detail") or (("test missing" if not match else "the test twice" if len(match) > 1
                                            else recorded_speed_problem(match[0])) if run else None)
        if not run or not run["ok"] or why:
            return f"round {rnd['round']}: {label} has no result" + (f" ({why})" if why else "")
    return None


FRAME_COLUMNS = ["round", "order", "side", "test", "params", "samples", "tps", "kept", "excluded"]


def rounds_frame(rounds: list[dict], *, keep_busy_rounds: bool = False):
    """The tidy table of a round log (pandas): one line per round, side and test, with the run's speed
    (run_tps) and whether the statistics keep it (else why not). Rows, the CSV, the tables and the report's
    speeds all come from here."""
    import pandas as pd

    order: list[tuple] = []
    names: dict[tuple, tuple[str, dict]] = {}
    for rnd in rounds:
        for run in (rnd.get("runs") or {}).values():
            for t in run.get("tests") or []:
                k = _key(t["params"])
                if k not in names:
                    names[k] = (t["test"], t["params"])
                    order.append(k)
    records = []
    for k in order:
        test, params = names[k]
        for rnd in rounds:
            why = _round_exclusion(rnd, k, keep_busy_rounds)
            for label in ("base", "head"):
                run = (rnd.get("runs") or {}).get(label) or {}
                match = [t for t in run.get("tests", []) if _key(t["params"]) == k]
                records.append({"round": rnd["round"], "order": rnd["order"], "side": label, "test": test,
                                "params": json.dumps(params, sort_keys=True),
                                "samples": list(match[0].get("samples_ts") or []) if match else [],
                                "tps": run_tps(match[0]) if len(match) == 1 and run.get("ok")
                                and not recorded_speed_problem(match[0]) else math.nan,
                                "kept": why is None, "excluded": why})
    return pd.DataFrame.from_records(records, columns=FRAME_COLUMNS)


def write_csv(frame, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    frame.assign(samples=frame["samples"].map(json.dumps)).to_csv(dest, index=False)
    return dest


def rows_from_frame(frame, *, plan: Plan = Plan(), noise: dict[str, float] | None = None) -> list[dict]:
    """Bench rows from rounds_frame(): per test, the kept rounds' speeds and the decision (stats.decide).
    noise: per-round sd of ln(head/base) by test params (json) from an A/A bench of this machine."""
    rows = []
    for params_json in frame["params"].unique():
        sub = frame[frame["params"] == params_json]
        kept = sub[sub["kept"]].pivot(index="round", columns="side", values="tps").sort_index()
        excluded = list(dict.fromkeys(e for e in sub["excluded"] if isinstance(e, str)))
        base_tps, head_tps = [float(x) for x in kept.get("base", [])], [float(x) for x in kept.get("head", [])]
        noise_sd = (noise or {}).get(params_json)
        st = compare(base_tps, head_tps, plan, noise_sd=noise_sd) if base_tps else None
        eff = st.effect if st else None
        frac = (lambda x: None if x is None else math.exp(x) - 1.0)
        rows.append({
            "test": sub["test"].iloc[0], "params": json.loads(params_json), "rounds": [int(r) for r in kept.index],
            "base_tps": base_tps, "head_tps": head_tps,
            "ratio": eff.ratio if eff else None,
            "ci95": list(eff.ci_ratio) if eff else None,
            "ci_method": "t-seq" if eff else None,
            "p_value": eff.p_value if eff else None,
            "aa_spread": frac(st.margin) if eff else None,
            "threshold": frac(st.margin) if eff else None,
            "noise_sd": st.noise_sd if st else None,
            "decided_after": st.decided_after if st else None,
            "more_rounds": st.more_rounds if st else None,
            "verdict": st.verdict if st else "insufficient data",
            "excluded": excluded,
        })
    return rows


def analyse(rounds: list[dict], *, keep_busy_rounds: bool = False, plan: Plan = Plan(),
            noise: dict[str, float] | None = None) -> list[dict]:
    """Bench rows from recorded rounds (the JSON form of Round, so recorded files re-analyse the same way)."""
    return rows_from_frame(rounds_frame(rounds, keep_busy_rounds=keep_busy_rounds), plan=plan, noise=noise)


def decisive(rows: list[dict]) -> bool:
    """Every row has a verdict a sequential bench may stop on."""
    return bool(rows) and all(r["verdict"] in ("faster", "slower", "no change") for r in rows)


def bench_document(models: dict[str, Path], bench_args: list[str], rounds: list[Round], repetitions: int,
                   base: Side, head: Side, *, keep_busy_rounds: bool = False, decision: dict | None = None,
                   host: dict | None = None) -> dict:
    """compare "builds" (one model, base vs head build) or "models" (one build, the base side's model as the
    reference); pinset report takes only the first kind."""
    model = models["head"]
    compare_models = models["base"] != models["head"]
    recorded = [r.to_json() for r in rounds]
    decision = decision or decision_record(Plan())
    rows = analyse(recorded, keep_busy_rounds=keep_busy_rounds, plan=plan_of(decision), noise=noise_of(decision))
    decision = {**decision, "more_rounds": more_rounds(rows)}
    snap = next((s for r in rounds for s in (r.gpu_before, r.gpu_after) if s), None)
    return BenchResult(
        _ok(rows, recorded), "models" if compare_models else "builds", {"path": str(model), "name": model.name},
        list(bench_args), len(rounds), repetitions, 1,
        {"build": base.build, "commit": _commit(base, rounds, "base"), "model": models["base"].name},
        {"build": head.build, "commit": _commit(head, rounds, "head"), "model": models["head"].name},
        {"name": snap.name, "driver": snap.driver} if snap else None, recorded,
        [BenchRow.from_json(Doc(r, "<bench>", "bench.rows")) for r in rows],
        {"method": METHOD, "decision": decision, **({"host": host} if host else {}),
         **({"pinset": head.pinset} if head.pinset else {})}).to_json()


METHOD = ("run speed = median of llama-bench's samples; per-round log(head/base), mean effect, t CI at alpha 0.05 "
          "spread over the bench's looks (Bonferroni; one look for a fixed round count), verdict at the first decisive "
          "look; no change = CI inside ±max(1 %, per-round noise sd)")


def decision_record(plan: Plan, *, noise: list[dict] | None = None, noise_from: str | None = None,
                    max_rounds: int | None = None, max_time_s: float | None = None, elapsed_s: float | None = None,
                    budget_ran_out: bool = False) -> dict:
    """The JSON "decision" object: how the verdicts were reached (docs/bench.md)."""
    return {"rule": RULE, "alpha": plan.alpha, "looks": plan.looks, "first_look": plan.first_look,
            "alpha_per_look": plan.alpha_per_look, "margin_min": math.exp(MIN_EFFECT) - 1.0, "noise_k": NOISE_K,
            "noise_from": noise_from, "noise": noise, "adaptive": plan.looks > 1, "max_rounds": max_rounds,
            "max_time_s": max_time_s, "elapsed_s": None if elapsed_s is None else round(elapsed_s, 1),
            "budget_ran_out": budget_ran_out, "more_rounds": None}


def plan_of(decision: dict | None) -> Plan:
    """The plan a bench ran under, from its budget (not from the recorded looks and alpha, which an edited file
    could set to narrow every interval): adaptive with a round cap, else one look."""
    if not decision or not decision.get("adaptive") or not decision.get("max_rounds"):
        return Plan()
    return Plan.adaptive(int(decision["max_rounds"]) - 1, FIRST_LOOK)


def noise_of(decision: dict | None) -> dict[str, float] | None:
    """{params json: per-round sd of ln(head/base)} from the decision's A/A noise, as rows_from_frame takes it."""
    entries = (decision or {}).get("noise")
    return {json.dumps(e["params"], sort_keys=True): float(e["sd"]) for e in entries} if entries else None


def aa_noise(rows: list[dict]) -> list[dict]:
    """The noise an A/A bench measured, per test, to feed a later bench's margin (--noise-from): the sd of
    ln(head/base) over all its kept rounds (not only up to the deciding look)."""
    return [{"test": r["test"], "params": r["params"], "rounds": len(r["base_tps"]),
             "sd": float(np.std(np.log(np.asarray(r["head_tps"]) / np.asarray(r["base_tps"])), ddof=1))}
            for r in rows if len(r["base_tps"]) >= MIN_ROUNDS]


def more_rounds(rows: list[dict]) -> int | None:
    """The most further rounds any "too noisy" row suggests (None: none is, or none can say)."""
    wanted = [r["more_rounds"] for r in rows if r["verdict"] == "too noisy" and r.get("more_rounds")]
    return max(wanted) if wanted else None


def _ok(rows: list[dict], recorded: list[dict]) -> bool:
    """Every run succeeded (with physical speeds, also in a re-analysed file) and every row is "faster" or
    "no change"."""
    run_failed = any(not run["ok"] or any(recorded_speed_problem(t) for t in run.get("tests") or [])
                     for r in recorded for run in (r.get("runs") or {}).values())
    return bool(rows) and not run_failed and all(r["verdict"] in ("faster", "no change") for r in rows)


def reanalysed(doc: dict, *, keep_busy_rounds: bool = False) -> dict:
    """A recorded bench document with its rows recomputed from round_log by this pinset's method: for results
    written before the method changed. The original method is kept under reanalysed_from."""
    decision = doc.get("decision") or decision_record(Plan())
    plan = plan_of(decision)
    rows = analyse(doc["round_log"], keep_busy_rounds=keep_busy_rounds, plan=plan, noise=noise_of(decision))
    fresh = decision_record(plan)
    method = {k: fresh[k] for k in ("rule", "alpha", "looks", "first_look", "alpha_per_look", "margin_min", "noise_k")}
    return {**doc, "schema": SCHEMAS["bench"], "ok": _ok(rows, doc["round_log"]), "rows": rows, "method": METHOD,
            "decision": {**fresh, **decision, **method, "more_rounds": more_rounds(rows)},
            "reanalysed_from": {"method": doc.get("method"), "schema": doc.get("schema")}}


def _commit(side: Side, rounds: list[Round], label: str) -> str:
    """The side's commit; for explicit folders, llama-bench's own build_commit when it knows it."""
    if side.commit != "unknown":
        return side.commit
    for r in rounds:
        run = r.runs.get(label)
        for line in (run.lines if run else []):
            if line.build_commit and line.build_commit != "unknown":
                return line.build_commit
    return "unknown"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{(x - 1.0) * 100:+.1f} %"


def speed_stat(doc: dict) -> str:
    """What the t/s columns of every bench table hold (row_speeds), for the label next to them. Benches
    recorded before METHOD took a run's speed as llama-bench's avg_ts, the mean of its samples."""
    run = "the median of its `-r` samples" if str(doc.get("method")).startswith("run speed = median") else \
        "llama-bench's avg_ts, the mean of its `-r` samples, as recorded before pinset took the median"
    return f"median over kept rounds of each run's speed (a run's speed: {run})"


def row_speeds(row: dict) -> tuple[float | None, float | None]:
    """Base and head t/s of a row as every table shows them (bench.md, the console, the report), as speed_stat() says."""
    return (median(row["base_tps"]) if row["base_tps"] else None,
            median(row["head_tps"]) if row["head_tps"] else None)


def exclusion_kind(text: str) -> str:
    """What an `excluded` entry of a row is: "warm-up", "failed" (a run without a result) or "noise" (the
    round's speed is not trusted, e.g. another process used the GPU)."""
    if text.endswith(": warm-up"):
        return "warm-up"
    if re.search(r"^round \d+: (base|head) has no result", text):
        return "failed"
    return "noise"


def row_cells(row: dict) -> list[str]:
    n = len(row["base_tps"])
    b, h = row_speeds(row)
    ci = row["ci95"]
    return [row["test"], _params_text(row["params"]), str(n),
            "—" if b is None else f"{b:,.1f}", "—" if h is None else f"{h:,.1f}", _pct(row["ratio"]),
            "—" if not ci else f"{_pct(ci[0])} … {_pct(ci[1])}",
            "—" if row["p_value"] is None else f"{row['p_value']:.3g}",
            "—" if row["aa_spread"] is None else f"±{row['aa_spread'] * 100:.1f} %", verdict_text(row)]


def verdict_text(row: dict) -> str:
    """The verdict, with the further rounds a "too noisy" row suggests."""
    more = row.get("more_rounds")
    return f"{row['verdict']} (~{more} more rounds)" if row["verdict"] == "too noisy" and more else row["verdict"]


def band_name(doc: dict) -> str:
    """What a bench's `aa_spread` column holds, by the file's schema: schema 1 measured an A/A spread, schema 2
    records the sequential rule's no-change band (this module's own table and the report name it alike)."""
    return "no-change band" if doc.get("schema", 1) >= 2 else "A/A spread"


HEADERS = ["test", "params", "rounds", "base t/s", "head t/s", "head vs base", "95 % CI", "p", "no-change band",
           "verdict"]


def subject(doc: dict) -> str:
    """What a bench measured, for titles: the model, or "<model> vs <reference>" for a model comparison."""
    if doc.get("compare") == "models":
        return f"{doc['head']['model']} vs {doc['base']['model']}"
    return doc["model"]["name"]


def headers(doc: dict) -> list[str]:
    """HEADERS, with the two models named when the bench compares models rather than builds."""
    if doc.get("compare") != "models":
        return list(HEADERS)
    ref, new = doc["base"]["model"], doc["head"]["model"]
    return [*HEADERS[:3], f"{ref} t/s", f"{new} t/s", "vs reference", *HEADERS[6:]]


def _params_text(params: dict) -> str:
    keep = {"n_ubatch": "ub", "n_batch": "b", "n_gpu_layers": "ngl", "flash_attn": "fa", "n_threads": "t"}
    return " ".join(f"{short}={params[k]}" for k, short in keep.items() if k in params)


def bench_markdown(doc: dict, plot_name: str | None = None) -> str:
    cols = headers(doc)
    if doc.get("compare") == "models":
        title = f"### llama-bench: {doc['head']['model']} vs {doc['base']['model']} (reference), one build"
        sides = (f"build {doc['head']['build']} ({doc['head']['commit'][:12]}) for both; "
                 f"the reference model {doc['base']['model']} runs as \"base\"")
    else:
        title = f"### llama-bench: head vs base on {doc['model']['name']}"
        sides = (f"base {doc['base']['build']} ({doc['base']['commit'][:12]}), head {doc['head']['build']} "
                 f"({doc['head']['commit'][:12]})")
    lines = [title, "",
             f"{sides}; GPU: {doc['gpu']['name'] if doc['gpu'] else 'none (CPU)'}; "
             f"{doc['rounds']} interleaved rounds (first = warm-up) of `-r {doc['repetitions']}`; "
             f"args `{' '.join(doc['llama_bench_args'])}`. t/s: {speed_stat(doc)}.", "",
             *_decision_lines(doc),
             *table(cols, [row_cells(r) for r in doc["rows"]])]
    if doc.get("reanalysed_from"):
        lines += ["", "Re-analysed (`pinset bench --reanalyse`): rows recomputed from the recorded rounds; recorded with "
                  f"the method \"{doc['reanalysed_from']['method']}\"."]
    if plot_name:
        lines += ["", f"![per-round t/s]({plot_name})"]
    return "\n".join(lines) + "\n"


def _decision_lines(doc: dict) -> list[str]:
    """How the verdicts were reached (schema 2), in one paragraph."""
    dec = doc.get("decision")
    if not dec:
        return []
    looks = (f"stopping allowed after each of {dec['looks']} rounds (alpha {dec['alpha']:g} spread over them, "
             f"{dec['alpha_per_look']:.2g} each)" if dec["looks"] > 1 else f"one look, {1 - dec['alpha']:.0%} CI")
    band = f"from the A/A bench `{dec['noise_from']}`" if dec.get("noise_from") else "from this bench's own scatter"
    budget = ""
    if dec.get("adaptive"):
        budget = (f"; budget {dec['max_rounds']} rounds / {dec['max_time_s']:g} s, used {doc['rounds']} rounds / "
                  f"{dec['elapsed_s']:g} s" + (" — ran out" if dec.get("budget_ran_out") else ""))
    more = f"; the undecided rows suggest ~{dec['more_rounds']} more rounds" if dec.get("more_rounds") else ""
    return [f"Decision ({dec['rule']}): {looks}; no-change band ±max({dec['margin_min']:.0%}, "
            f"{dec['noise_k']:g} × per-round noise sd) {band}{budget}{more}.", ""]


# --- the result model (kind "bench"): written by `pinset bench`, read by `pinset report` -------------------
@dataclass
class BenchRow:
    """One test's base/head comparison. Numbers are None where they could not be computed ("insufficient
    data": fewer than 3 kept rounds, or every run failed)."""

    test: str
    params: dict
    base_tps: list[float]         # per kept round: each run's speed (median of its samples)
    head_tps: list[float]
    ratio: float | None
    ci95: list[float] | None
    p_value: float | None
    aa_spread: float | None       # a fraction: 0.01 = 1 %; schema 2: the "no change" margin (= threshold)
    verdict: str
    excluded: list[str]
    rounds: list[int] | None = None
    ci_method: str | None = None
    threshold: float | None = None
    noise_sd: float | None = None        # schema 2: per-round sd of ln(head/base) behind the margin
    decided_after: int | None = None     # schema 2: kept rounds at the first decisive look
    more_rounds: int | None = None       # schema 2: "too noisy": further rounds the scatter suggests

    def to_json(self) -> dict:
        return {"test": self.test, "params": dict(self.params), "rounds": self.rounds, "base_tps": list(self.base_tps),
                "head_tps": list(self.head_tps), "ratio": self.ratio, "ci95": self.ci95, "ci_method": self.ci_method,
                "p_value": self.p_value, "aa_spread": self.aa_spread, "threshold": self.threshold,
                "noise_sd": self.noise_sd, "decided_after": self.decided_after, "more_rounds": self.more_rounds,
                "verdict": self.verdict, "excluded": list(self.excluded)}

    @classmethod
    def from_json(cls, d: Doc, schema: int = SCHEMAS["bench"]) -> BenchRow:
        ci = d.get("ci95", list, None)
        if ci is not None:
            if len(ci) != 2 or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in ci):
                d.fail("ci95", f"expected [low, high], got {json.dumps(ci)[:40]}")
            ci = list(ci) if all(math.isfinite(x) for x in ci) else None   # NaN/inf: not measured
        ratio = d.num("ratio", null=True)
        verdict = d.choice("verdict", VERDICTS)
        if (ratio is None or ci is None) and verdict != "insufficient data":
            verdict = "insufficient data"   # a verdict without its numbers (NaN, null) claims nothing
        if schema >= 2 and ci is not None and ratio is not None and (why := _verdict_contradiction(
                verdict, ci, d.num("threshold", null=True, default=None))):
            d.fail("verdict", why)
        rounds = d.get("rounds", list, None, default=None)
        return cls(d.get("test", str), d.get("params", dict), d.nums("base_tps"), d.nums("head_tps"), ratio, ci,
                   d.num("p_value", null=True), d.num("aa_spread", null=True), verdict, d.strs("excluded"),
                   rounds, d.get("ci_method", str, None, default=None), d.num("threshold", null=True, default=None),
                   d.num("noise_sd", null=True, default=None), d.get("decided_after", int, None, default=None),
                   d.get("more_rounds", int, None, default=None))


@dataclass
class BenchResult:
    ok: bool
    compare: str                  # "builds" (base vs head build, one model) | "models" (two models, one build)
    model: dict                   # {"path", "name"}
    llama_bench_args: list[str]
    rounds: int
    repetitions: int
    warmup_rounds: int
    base: dict                    # {"build", "commit", "model"}
    head: dict
    gpu: dict | None              # {"name", "driver"}; None: run with the GPU hidden (device: CPU)
    round_log: list[dict]         # Round.to_json() of every round, warm-up included
    rows: list[BenchRow]
    extra: dict = field(default_factory=dict)   # method, aa_check, reanalysed_from, host, decision, aa_noise
    schema: int = SCHEMAS["bench"]               # a file read keeps its own (schema 1: the A/A-band rule's fields)

    @property
    def device(self) -> str:
        return self.gpu["name"] if self.gpu else "CPU"

    @staticmethod
    def failed_runs_of(round_log: list[dict]) -> list[str]:
        """"round N base: why" for every llama-bench run that failed or recorded no usable speed (warm-up
        included): what `_ok` counts as failed, so the report never reads such a run as a measurement."""
        out = []
        for r in round_log:
            for label, run in (r.get("runs") or {}).items():
                problem = next((f"{t.get('test')}: {why}" for t in run.get("tests") or []
                                if (why := recorded_speed_problem(t))), None) if run.get("ok") else None
                if not run.get("ok") or problem:
                    out.append(f"round {r['round']} {label}: {problem or run.get('detail') or 'failed'}")
        return out

    def to_json(self) -> dict:
        return {"schema": self.schema, "kind": "bench", "ok": self.ok, "compare": self.compare,
                "model": dict(self.model), "llama_bench_args": list(self.llama_bench_args), "rounds": self.rounds,
                "repetitions": self.repetitions, "warmup_rounds": self.warmup_rounds, "base": dict(self.base),
                "head": dict(self.head), "gpu": self.gpu, "round_log": self.round_log,
                "rows": [r.to_json() for r in self.rows], **self.extra}

    @classmethod
    def from_json(cls, d: Doc) -> BenchResult:
        m, sides = d.obj("model"), {label: d.obj(label) for label in ("base", "head")}
        gpu = d.obj("gpu", null=True)
        seen: set[int] = set()
        for r in d.objs("round_log"):
            number = r.get("round", int)
            if number in seen:
                r.fail("round", f"round {number} is recorded twice")
            seen.add(number)
            r.get("order", str), r.get("warmup", bool)
            r.get("gpu_clock_mhz", int, None), r.get("other_gpu_processes", bool, None)
            runs = r.obj("runs", default=None)   # report fixtures of schema 1 summarised rounds without runs
            for label in (runs.raw if runs else {}):
                run = runs.obj(label)
                run.get("ok", bool), run.get("detail", str, None, default=None)
                for t in run.objs("tests", default=[]):
                    t.get("test", str), t.get("params", dict), t.nums("samples_ts") if t.has("samples_ts") else None
        _check_decision(d.obj("decision", default=None))
        for e in d.objs("aa_noise", default=[]):
            _check_noise_entry(e)
        rows = [BenchRow.from_json(r, d.get("schema", int)) for r in d.objs("rows")]
        read_host(d)  # checked here; kept in `extra` like every key the model does not name
        d.get("pinset", str, None, default=None)  # the pin set's digest, like host kept in `extra`
        known = {"schema", "kind", "ok", "compare", "model", "llama_bench_args", "rounds", "repetitions",
                 "warmup_rounds", "base", "head", "gpu", "round_log", "rows"}
        base, head = ({**s.raw, "build": s.get("build", str), "commit": s.get("commit", str)}
                      for s in (sides["base"], sides["head"]))
        return cls(d.get("ok", bool) and bool(rows), d.choice("compare", ("builds", "models"), default="builds"),
                   {"path": m.get("path", str), "name": m.get("name", str)}, d.strs("llama_bench_args"),
                   d.get("rounds", int), d.get("repetitions", int), d.get("warmup_rounds", int), base, head,
                   {"name": gpu.get("name", str), "driver": gpu.get("driver", str)} if gpu else None,
                   d.get("round_log", list), rows, {k: v for k, v in d.raw.items() if k not in known},
                   d.get("schema", int))


def _check_noise_entry(e: Doc) -> None:
    """One A/A noise entry: the per-round sd of ln(head/base) of one test, a finite number in [0, 1] (a larger sd,
    a speed ratio scattering by more than e per round, measures nothing and would make any band "no change")."""
    e.get("params", dict)
    sd = e.num("sd")
    if not 0 <= sd <= 1:
        e.fail("sd", f"{sd!r} is not a per-round sd of ln(head/base) (0 to 1)")


def _check_decision(dec: Doc | None) -> None:
    """The keys of `decision` that the re-analysis reads (plan_of, noise_of), typed."""
    if dec is None:
        return
    for key in ("looks", "first_look"):
        if dec.has(key) and dec.get(key, int) < 1:
            dec.fail(key, "must be at least 1")
    if dec.has("alpha") and not 0 < dec.num("alpha") < 1:
        dec.fail("alpha", "must lie between 0 and 1")
    dec.get("adaptive", bool, default=False)
    max_rounds = dec.get("max_rounds", int, None, default=None)
    if max_rounds is not None and max_rounds < FIRST_LOOK + 1:
        dec.fail("max_rounds", f"must be at least {FIRST_LOOK + 1}")
    if dec.get("noise", list, None, default=None):
        for e in dec.objs("noise"):
            _check_noise_entry(e)


def _verdict_contradiction(verdict: str, ci: list[float], band: float | None) -> str | None:
    """Why a schema-2 row's verdict does not follow from its own CI and no-change band (stats.verdict_for), e.g. an
    edited "faster" over a CI that includes 1; None when it does."""
    lo, hi = ci
    tol = 1e-9
    if verdict == "faster" and not lo > 1 - tol:
        return f"\"faster\" but the CI {lo:.4g} … {hi:.4g} does not lie above 1"
    if verdict == "slower" and not hi < 1 + tol:
        return f"\"slower\" but the CI {lo:.4g} … {hi:.4g} does not lie below 1"
    if verdict == "no change":
        if band is None:
            return "\"no change\" without its no-change band (threshold)"
        inside = math.log(lo) > -math.log1p(band) - tol and math.log(hi) < math.log1p(band) + tol if lo > 0 else False
        if not inside:
            return f"\"no change\" but the CI {lo:.4g} … {hi:.4g} is not inside ±{band:.2%}"
    return None
