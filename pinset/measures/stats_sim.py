"""Simulated benchmark rounds to check the bench decision rule (tests and benchmarks/bench_rule_sim.py).

Noise model of one kept round's log-ratio d_r = ln(head_r / base_r): the true effect ln(effect) plus noise
of sd sigma, either normal, Student t with 3 d.o.f. scaled to the same sd ("t3": heavy tails), or normal
with a share `outliers` of rounds shifted by ±OUTLIER_SDS sd (one llama-bench process that ran slow, as in
the recorded H200 rounds: single rounds 10-25 % off on the 4-layer model).
"""

from __future__ import annotations

from collections import Counter

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
    plan = Plan.adaptive(plan_kept, first_look) if first_look < plan_kept else Plan()
    counts: Counter[str]
    counts, used = Counter(), []
    for _ in range(trials):
        d = simulate_log_ratios(rng, max_kept, sigma, effect, tails, outliers)
        row = decide(d, plan, noise_sd=noise_sd)
        counts[row.verdict] += 1
        used.append(row.decided_after or max_kept)
    return {k: v / trials for k, v in counts.items()}, np.asarray(used)


def verdict_rates(n: int, sigma: float, effect: float, *, tails: str = "normal", trials: int = 400,
                  seed: int = 0) -> dict[str, float]:
    """A fixed count of n kept rounds (one look)."""
    assert n >= MIN_ROUNDS
    return sequential_trials(sigma, effect, max_kept=n, first_look=n, tails=tails, trials=trials, seed=seed)[0]
