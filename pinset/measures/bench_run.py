"""Running interleaved llama-bench rounds for base and head, and the one stage function `pinset bench` calls.

Round r runs both binaries back to back, base first on even rounds (BH) and head first on odd ones
(HB), so slow drift and "second run is warmer" effects cancel in the per-round ratio. Round 0 is a
warm-up (clocks ramp, page cache fills) and is recorded but never used. An adaptive bench (no fixed round
count) analyses the rounds after each one and stops when every row is decisive, the budget is spent, or runs
keep failing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from pinset import runner
from pinset.checks.nvidia_smi import gpu_order_env
from pinset.measures import gpu as gpu_mod
from pinset.measures.bench_analysis import analyse_rows, bench_result, decision_record, decisive, is_aa_check
from pinset.measures.bench_model import DECISIVE, FIRST_LOOK, BenchResult, BenchRow
from pinset.measures.llama_bench import BenchLine, BenchParseError, parse_jsonl, run_problem
from pinset.measures.sides import Side
from pinset.measures.stats import Plan

CPU_ENV = {"CUDA_VISIBLE_DEVICES": ""}


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


def run_side(side: Side, model: Path, bench_args: list[str], repetitions: int, *, cpu: bool,
             log: Path | None = None, timeout: float = 1800) -> tuple[SideRun, runner.Completed]:
    argv: list[str | Path] = [side.exe("llama-bench"), "-m", model, "-o", "jsonl", "-r", str(repetitions), *bench_args]
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


def failing(so_far: list[Round]) -> bool:
    """A run failed in each of the last two rounds, or both runs of the last one: more rounds would only
    repeat the failure, so an adaptive bench stops (not ok, and not for want of time)."""
    failed = [any(not run.ok for run in rnd.runs.values()) for rnd in so_far]
    return failed[-2:] == [True, True] or not any(run.ok for run in so_far[-1].runs.values())


@dataclass(frozen=True)
class Look:
    """What an adaptive bench knows after a round: for the per-round progress line."""

    rounds: int
    planned: int
    used_s: float
    undecided: list[str]
    adaptive: bool
    max_time_s: float


def run_bench(base: Side, head: Side, models: dict[str, Path], bench_args: list[str], *, rounds: int | None,
              max_rounds: int, max_time_s: float, repetitions: int, cpu: bool, aa: bool = False,
              keep_busy_rounds: bool = False, noise: dict | None = None, noise_from: str | None = None,
              log_dir: Path | None = None, host: dict | None = None,
              on_round: Callable[[Round], None] | None = None,
              on_look: Callable[[Look], None] | None = None) -> BenchResult:
    """The whole bench: rounds (a fixed count, or adaptive up to max_rounds/max_time_s), the analysis, and the
    bench result. aa: --aa (head runs the base programs); identical programs on both sides are an A/A check
    too (is_aa_check). noise: bench_analysis.noise_from() of the --noise-from file. on_round/on_look: progress."""
    if aa:
        head = replace(base, label="head")
    compare_models = models["base"] != models["head"]
    adaptive = rounds is None
    plan = Plan.adaptive(max_rounds - 1, FIRST_LOOK) if adaptive else Plan()
    decision = decision_record(plan, noise=noise["noise"] if noise else None, noise_from=noise_from,
                               max_rounds=max_rounds if adaptive else None, max_time_s=max_time_s if adaptive else None)
    start = time.monotonic()
    state = {"ran_out": False}
    planned = max_rounds if rounds is None else rounds   # adaptive: up to max_rounds

    def done(so_far: list[Round]) -> bool:
        """Adaptive stop: every row decisive, or the budget spent."""
        rows: list[BenchRow] = analyse_rows([r.to_json() for r in so_far], keep_busy_rounds=keep_busy_rounds,
                                            plan=plan, noise=noise and noise["by_params"])
        used = time.monotonic() - start
        if on_look:
            on_look(Look(len(so_far), planned, used, [r.test for r in rows if r.verdict not in DECISIVE], adaptive,
                         max_time_s))
        if not adaptive:
            return False
        if decisive(rows) or failing(so_far):
            return True
        last = sum(run.seconds for run in so_far[-1].runs.values())
        state["ran_out"] = used + last > max_time_s or len(so_far) >= max_rounds   # the next would overrun
        return state["ran_out"]

    recorded = run_rounds(base, head, models, bench_args, rounds=planned, repetitions=repetitions, cpu=cpu,
                          log_dir=log_dir, on_round=on_round, done=done)
    decision.update(elapsed_s=round(time.monotonic() - start, 1), budget_ran_out=state["ran_out"])
    # head is the base build itself: --aa, or the same programs given for both sides (never evidence for the pins)
    is_aa = is_aa_check(base, head, program="llama-bench", aa_flag=aa, compare_models=compare_models)
    return bench_result(models, bench_args, recorded, repetitions, base, head, keep_busy_rounds=keep_busy_rounds,
                        decision=decision, host=host, aa=is_aa)
