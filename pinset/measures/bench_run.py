"""Running interleaved llama-bench rounds for base and head, and the one stage function `pinset bench` calls.

Round r runs both binaries back to back, in an order drawn at random for each round (BH: base first, HB: head
first; ORDER_RULE), so "second run is warmer" effects and slow drift average out of the per-round ratio, and a
machine whose speed switches between levels in spells (an H100's pp512 at ~1,300 and ~1,750 t/s for a few runs at
a time) cannot line its spells up with a fixed BH/HB/BH/HB pattern: with the order alternating, spells of two
runs put head in the fast level round after round, and an A/A bench said "faster" +17.6 % (docs/bench.md,
benchmarks/bench_rule_sim.py's spells rows). The draw uses the system's entropy, never a fixed seed. Round 0 is a
warm-up (clocks ramp, page cache fills) and is recorded but never used. An adaptive bench (no fixed round
count) analyses the rounds after each one and stops when every row is decisive, the budget is spent, or runs
keep failing.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from pinset import runner
from pinset.checks.nvidia_smi import gpu_order_env
from pinset.errors import BenchParseError
from pinset.measures import gpu as gpu_mod
from pinset.measures.bench_analysis import (
    MAX_ROUNDS,
    MAX_TIME_S,
    AaNoise,
    analyse_rows,
    bench_result,
    decision_record,
    decisive,
    is_aa_check,
)
from pinset.measures.bench_log import RoundRecord, RunRecord, SpeedRecord
from pinset.measures.bench_model import DECISIVE, FIRST_LOOK, BenchResult, BenchRow
from pinset.measures.llama_bench import BenchLine, parse_jsonl, run_problem
from pinset.measures.rule import Plan
from pinset.measures.sides import Side

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

    def record(self) -> RoundRecord:
        """The round as the round log records it (bench_log): what the analysis, the JSON and the report read."""
        clock = self.gpu_after.sm_clock_mhz if self.gpu_after else (self.gpu_before.sm_clock_mhz if self.gpu_before else None)
        return RoundRecord(
            self.index, self.order, self.warmup, clock, self.other_gpu_processes,
            self.gpu_before.to_json() if self.gpu_before else None, self.gpu_after.to_json() if self.gpu_after else None,
            {label: RunRecord(r.ok, r.detail, round(r.seconds, 2),
                              [SpeedRecord(line.test, line.params, line.avg_ts, line.stddev_ts, list(line.samples_ts))
                               for line in r.lines])
             for label, r in self.runs.items()})


def ran_commit(side: Side, rounds: list[Round], label: str) -> str:
    """The side's commit; for explicit folders, llama-bench's own build_commit when it knows it."""
    if side.commit != "unknown":
        return side.commit
    for r in rounds:
        run = r.runs.get(label)
        for line in (run.lines if run else []):
            if line.build_commit and line.build_commit != "unknown":
                return line.build_commit
    return "unknown"


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
               repetitions: int, cpu: bool, log_dir: Path | None = None, on_round=None, done=None,
               orders: random.Random | None = None) -> list[Round]:
    """models: the GGUF each side runs ({"base": ..., "head": ...}; the same file for a build comparison).
    rounds: the most rounds to run; done(rounds so far) -> True stops after a round (adaptive benches).
    orders: where each round's order is drawn (round_order); default the system's entropy."""
    sides = {"base": base, "head": head}
    out = []
    draw = orders or random.SystemRandom()
    tests: list[str] | None = None   # the tests of the first good run: every other run must have the same
    for i in range(rounds):
        order = round_order(i, draw)
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


ORDER_RULE = "random"   # each kept round's order drawn at random (the decision record's "order")


def round_order(index: int, draw: random.Random) -> str:
    """The order of round `index`: the warm-up (0) base first, every other one BH or HB by a fair draw."""
    return "BH" if index == 0 else draw.choice(("BH", "HB"))


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


@dataclass(frozen=True)
class BenchSettings:
    """What one bench measures and for how long: the models, llama-bench's options and the round budget. The verb
    makes it from its options (commands/bench.py); the stage (run_bench) and what it calls read it."""

    models: dict[str, Path]          # the GGUF each side runs ({"base", "head"}); one file for a build comparison
    bench_args: tuple[str, ...] = ()   # llama-bench options after `--` (not -m, -r, -o: pinset sets them)
    repetitions: int = 3             # llama-bench -r per run
    rounds: int | None = None        # a fixed count, warm-up included; None: adaptive up to max_rounds / max_time_s
    max_rounds: int = MAX_ROUNDS
    max_time_s: float = MAX_TIME_S
    cpu: bool = False                # GPUs hidden (CUDA_VISIBLE_DEVICES=)
    aa: bool = False                 # --aa: head runs the base programs
    keep_busy_rounds: bool = False   # keep rounds during which another process used the GPU
    noise: AaNoise | None = None     # --noise-from: the A/A noise that sets the no-change band (noise_from)
    log_dir: Path | None = None      # where every llama-bench command line and output is kept
    host: dict | None = None         # checks.machine.host_identity() with the cell's gpu_class

    @property
    def compare_models(self) -> bool:
        return self.models["base"] != self.models["head"]

    @property
    def adaptive(self) -> bool:
        return self.rounds is None

    @property
    def planned(self) -> int:
        """The most rounds the bench runs: the fixed count, or the adaptive cap."""
        return self.max_rounds if self.rounds is None else self.rounds

    @property
    def plan(self) -> Plan:
        # each round's order is drawn (round_order), so the rounds' signs are a valid test too (Plan.signs)
        return Plan.adaptive(self.max_rounds - 1, FIRST_LOOK, signs=True) if self.adaptive else Plan(signs=True)


def run_bench(base: Side, head: Side, settings: BenchSettings, *, on_round: Callable[[Round], None] | None = None,
              on_look: Callable[[Look], None] | None = None) -> BenchResult:
    """The whole bench: rounds (a fixed count, or adaptive up to max_rounds/max_time_s), the analysis, and the
    bench result. settings.aa: head runs the base programs; identical programs on both sides are an A/A check
    too (is_aa_check). on_round/on_look: progress."""
    s = settings
    if s.aa:
        head = replace(base, label="head")
    plan, noise = s.plan, s.noise
    decision = decision_record(plan, noise=noise.entries if noise else None, noise_from=noise.source if noise else None,
                               max_rounds=s.max_rounds if s.adaptive else None,
                               max_time_s=s.max_time_s if s.adaptive else None)
    start = time.monotonic()
    state = {"ran_out": False}

    def done(so_far: list[Round]) -> bool:
        """Adaptive stop: every row decisive, or the budget spent."""
        rows: list[BenchRow] = analyse_rows([r.record() for r in so_far], keep_busy_rounds=s.keep_busy_rounds,
                                            plan=plan, noise=noise.by_params if noise else None)
        used = time.monotonic() - start
        if on_look:
            on_look(Look(len(so_far), s.planned, used, [r.test for r in rows if r.verdict not in DECISIVE], s.adaptive,
                         s.max_time_s))
        if not s.adaptive:
            return False
        if decisive(rows) or failing(so_far):
            return True
        last = sum(run.seconds for run in so_far[-1].runs.values())
        state["ran_out"] = used + last > s.max_time_s or len(so_far) >= s.max_rounds   # the next would overrun
        return state["ran_out"]

    ran = run_rounds(base, head, s.models, list(s.bench_args), rounds=s.planned, repetitions=s.repetitions, cpu=s.cpu,
                     log_dir=s.log_dir, on_round=on_round, done=done)
    decision.update(elapsed_s=round(time.monotonic() - start, 1), budget_ran_out=state["ran_out"])
    # head is the base build itself: --aa, or the same programs given for both sides (never evidence for the pins)
    is_aa = is_aa_check(base, head, program="llama-bench", aa_flag=s.aa, compare_models=s.compare_models)
    base, head = (replace(side, commit=ran_commit(side, ran, side.label)) for side in (base, head))
    return bench_result(s.models, list(s.bench_args), [r.record() for r in ran], s.repetitions, base, head,
                        keep_busy_rounds=s.keep_busy_rounds, decision=decision, host=s.host, aa=is_aa)
