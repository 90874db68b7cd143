"""Simulated benchmark rounds to check the bench statistics (used by tests and benchmarks/stats_aa.py).

Noise model per round r: a shared drift g_r ~ N(0, drift^2) (clocks, temperature: both runs of a round
see it) and independent run noise e ~ N(0, sigma^2) (or Student t with 3 d.o.f. scaled to the same sd
for heavy tails); speed = mu * effect * exp(g_r + e). effect = 1.0 is an A/A run, 0.9 a 10 % slowdown.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from pinset.measures.stats import compare


def simulate_rounds(rng: np.random.Generator, n: int, sigma: float, effect: float, drift: float = 0.0,
                    heavy_tails: bool = False, mu: float = 10_000.0) -> tuple[list[float], list[float]]:
    g = rng.normal(0.0, drift, n)
    if heavy_tails:
        e = rng.standard_t(3, (2, n)) * sigma / np.sqrt(3.0)
    else:
        e = rng.normal(0.0, sigma, (2, n))
    base = mu * np.exp(g + e[0])
    head = mu * effect * np.exp(g + e[1])
    return list(base), list(head)


def verdict_rates(n: int, sigma: float, effect: float, *, drift: float = 0.0, heavy_tails: bool = False,
                  trials: int = 400, seed: int = 0) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    counts = Counter(compare(*simulate_rounds(rng, n, sigma, effect, drift, heavy_tails)).verdict
                     for _ in range(trials))
    return {k: v / trials for k, v in counts.items()}
