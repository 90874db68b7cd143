"""Simulated benchmark rounds to check the bench decision rule (tests and benchmarks/bench_rule_sim.py).

Noise model of one kept round's log-ratio d_r = ln(head_r / base_r): the true effect ln(effect) plus noise
of sd sigma, either normal, Student t with 3 d.o.f. scaled to the same sd ("t3": heavy tails), or normal
with a share `outliers` of rounds shifted by ±OUTLIER_SDS sd (one llama-bench process that ran slow, as in
the recorded H200 rounds: single rounds 10-25 % off on the 4-layer model).

Noise in spells ("spells": spell_log_ratios): the machine's speed switches between two levels that persist for a
few runs, as the H100's pp512 did (~1,300 and ~1,750 t/s, tests/fixtures/llama-bench/h100-spells/): runs in time
order follow a two-state process whose dwell times (in runs) are drawn from those of the recorded A/A round log
(SPELLS_H100, made by spells_from_runs from it; `scale` stretches every dwell), each run's speed its level times
lognormal noise of the within-level sd. A round's log-ratio is head's run against base's in the round's order
(alternating BH/HB, as pinset bench did before, or drawn at random, as it does now): with the order alternating,
spells of two runs line up with it (head fast round after round) and the rule called an A/A "faster".
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from pinset.measures.rule import MIN_ROUNDS, Plan
from pinset.measures.stats import decide

OUTLIER_SDS = 5.0


def simulate_log_ratios(rng: np.random.Generator, n: int, sigma: float, effect: float, tails: str = "normal",
                        outliers: float = 0.0) -> np.ndarray:
    if tails == "t3":
        noise = rng.standard_t(3, n) * sigma / np.sqrt(3.0)
    else:
        noise = rng.normal(0.0, sigma, n)
    if outliers:
        hit = rng.random(n) < outliers
        noise = noise + hit * rng.choice((-1.0, 1.0), n) * OUTLIER_SDS * sigma
    return np.log(effect) + noise


def sequential_trials(sigma: float, effect: float, *, max_kept: int, first_look: int = 5, tails: str = "normal",
                      outliers: float = 0.0, trials: int = 400, seed: int = 0,
                      noise_sd: float | None = None, plan_kept: int | None = None) -> tuple[dict[str, float], np.ndarray]:
    """(share of each verdict, kept rounds used per trial) for a bench that stops at the first decisive look
    or at max_kept kept rounds. first_look == max_kept: a fixed round count (one look). plan_kept: the kept
    rounds the plan spreads alpha over when the bench stops before them (its --max-time ends it before its
    --max-rounds), default max_kept."""
    rng = np.random.default_rng(seed)
    plan_kept = plan_kept or max_kept
    plan = Plan.adaptive(plan_kept, first_look, signs=True) if first_look < plan_kept else Plan(signs=True)
    counts: Counter[str]
    counts, used = Counter(), []
    for _ in range(trials):
        d = simulate_log_ratios(rng, max_kept, sigma, effect, tails, outliers)
        base = rng.normal(0.0, sigma / np.sqrt(2.0), max_kept)   # each side's own run-to-run scatter
        row = decide(d, plan, noise_sd=noise_sd, sides=(base, base + d))
        counts[row.verdict] += 1
        used.append(row.decided_after or max_kept)
    return {k: v / trials for k, v in counts.items()}, np.asarray(used)


def verdict_rates(n: int, sigma: float, effect: float, *, tails: str = "normal", trials: int = 400,
                  seed: int = 0) -> dict[str, float]:
    """A fixed count of n kept rounds (one look)."""
    assert n >= MIN_ROUNDS
    return sequential_trials(sigma, effect, max_kept=n, first_look=n, tails=tails, trials=trials, seed=seed)[0]


@dataclass(frozen=True)
class Spells:
    """A two-level regime: dwell times (runs) seen at each level, the levels' ratio and the sd within a level."""

    dwell_low: tuple[int, ...]
    dwell_high: tuple[int, ...]
    level_ratio: float      # high level / low level
    within_sd: float        # sd of ln(speed) of a run within its level
    high_share: float       # share of runs at the high level


def spells_from_runs(speeds: list[float]) -> Spells:
    """The regime of runs' speeds in time order: levels by two-means on ln(speed), each maximal stretch of runs at
    one level a dwell (the last, cut by the bench's end, counted too)."""
    logs = np.array([math.log(x) for x in speeds])
    lo, hi = float(logs.min()), float(logs.max())
    for _ in range(50):
        cut = (lo + hi) / 2.0
        lo_new, hi_new = float(logs[logs < cut].mean()), float(logs[logs >= cut].mean())
        if (lo_new, hi_new) == (lo, hi):
            break
        lo, hi = lo_new, hi_new
    high = logs >= (lo + hi) / 2.0
    dwell: dict[bool, list[int]] = {False: [], True: []}
    start = 0
    for i in range(1, len(high) + 1):
        if i == len(high) or high[i] != high[start]:
            dwell[bool(high[start])].append(i - start)
            start = i
    within = np.concatenate([logs[~high] - lo, logs[high] - hi])
    return Spells(tuple(dwell[False]), tuple(dwell[True]), round(math.exp(hi - lo), 4),
                  round(float(within.std(ddof=2)), 4), round(float(high.mean()), 4))


# pp512 of the recorded H100 A/A (bench-aa-run2.json: 40 runs, warm-up included), by spells_from_runs;
# tests/measures/test_bench_spells.py makes it again from the file.
SPELLS_H100 = Spells(dwell_low=(1, 2, 1, 1, 1, 4, 3, 1, 2, 4, 6), dwell_high=(1, 1, 1, 2, 2, 1, 1, 3, 1, 1),
                     level_ratio=1.2947, within_sd=0.039, high_share=0.35)


def spell_log_ratios(rng: np.random.Generator, rounds: int, effect: float, *, spells: Spells = SPELLS_H100,
                     scale: int = 1, order: str = "random", sides: bool = False):
    """The kept rounds' ln(head/base) of a bench of `rounds` rounds (round 0, the warm-up, dropped) on a machine in
    `spells` (dwells stretched `scale` times); order "alternate" (BH, HB, BH...) or "random" (each round's drawn).
    sides: also (ln base speeds, ln head speeds) of those rounds."""
    runs = 2 * rounds
    state = bool(rng.random() < spells.high_share)
    levels: list[float] = []
    while len(levels) < runs + 16 * scale:
        dwell = int(rng.choice(spells.dwell_high if state else spells.dwell_low)) * scale
        levels += [math.log(spells.level_ratio) if state else 0.0] * dwell
        state = not state
    skip = int(rng.integers(0, 8 * scale))   # the bench starts anywhere in a spell
    speed = np.array(levels[skip:skip + runs]) + rng.normal(0.0, spells.within_sd, runs)
    out, bases, heads = [], [], []
    for r in range(1, rounds):
        first_base = (r % 2 == 0) if order == "alternate" else bool(rng.random() < 0.5)
        base, head = (speed[2 * r], speed[2 * r + 1]) if first_base else (speed[2 * r + 1], speed[2 * r])
        out.append(head - base + math.log(effect))
        bases.append(base)
        heads.append(head + math.log(effect))
    if sides:
        return np.array(out), (np.array(bases), np.array(heads))
    return np.array(out)


def spell_trials(effect: float, *, max_kept: int, scale: int = 1, order: str = "random", first_look: int = 5,
                 trials: int = 400, seed: int = 0, spells: Spells = SPELLS_H100) -> tuple[dict[str, float], np.ndarray]:
    """sequential_trials for noise in spells: (share of each verdict, kept rounds used per trial)."""
    rng = np.random.default_rng(seed)
    plan = Plan.adaptive(max_kept, first_look, signs=order == "random")   # as pinset bench ran with each order
    counts: Counter[str] = Counter()
    used = []
    for _ in range(trials):
        d, sides = spell_log_ratios(rng, max_kept + 1, effect, spells=spells, scale=scale, order=order, sides=True)
        row = decide(d, plan, sides=sides)
        counts[row.verdict] += 1
        used.append(row.decided_after or max_kept)
    return {k: v / trials for k, v in counts.items()}, np.asarray(used)
