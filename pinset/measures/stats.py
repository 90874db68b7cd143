"""Statistics for interleaved base/head benchmark rounds, kept apart from the runner so they can be
checked on recorded and simulated rounds (benchmarks/bench_rule_sim.py, tests/measures/test_stats.py).

Model: round r gives one base speed b_r and one head speed h_r measured back to back (order flipped
every round), so d_r = ln(h_r / b_r) cancels what drifts slowly (clocks, temperature, other load).

Rule "seq-t-bonferroni" (valid when the bench stops as soon as every row is decisive):
- effect: the mean of d, shown as the ratio exp(mean) (> 1: head faster).
- CI after n kept rounds: mean ± t_{1-a/2, n-1} · s / sqrt(n), with a = alpha / looks. A bench that may
  stop after any of `looks` rounds spends alpha evenly over them (Bonferroni), so with probability
  >= 1 - alpha *every* interval it could stop at covers the true effect, whatever the stopping rule.
  A fixed --rounds N is one look: the plain 95 % t interval.
- margin (the "no change" band): ±max(1 %, NOISE_K · sd), sd the per-round sd of d: from an A/A bench
  of the same machine when given (`--noise-from`), else this bench's own scatter. Changes below 1 %
  are not worth a verdict; on a noisier row the band is one round's noise, the finest statement the
  machine supports in a budget of tens of rounds: an A/A needs ~((z + 1.6) / NOISE_K)^2 rounds to fit
  its CI inside the band, independent of the noise level, and a real change as large as the band
  still comes out "faster"/"slower" first (its CI leaves 0 long before it could fit inside the band).
- p (the bench table's column): the p-value of the test that decided, at the deciding look, comparable with
  alpha / looks: for "faster"/"slower" (and "too noisy", at the last look) the two-sided t test of mean 0, for
  "no change" the equivalence test (TOST) against ±margin, doubled; each is below alpha / looks exactly when the
  CI decided so (deciding_p).
- verdict at a look: "no change" when the CI lies inside ±margin; else "faster"/"slower" when it
  excludes 0; else "too noisy". A row's verdict is the one of its first decisive look (the look at
  which the bench could have stopped for it); < MIN_ROUNDS kept rounds: "insufficient data".
Error guarantee (from the coverage above, checked by simulation): a false "faster"/"slower" (true effect
on the other side of 0) or a false "no change" (true effect outside the band) has probability <= alpha.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats

from pinset.measures.rule import MIN_EFFECT, MIN_ROUNDS, NOISE_K, Plan


@dataclass(frozen=True)
class Effect:
    n: int
    log_ratio: float
    ci_log: tuple[float, float]
    p_value: float | None        # Wilcoxon signed-rank, informational (RowStats.p_value is the deciding test's)

    @property
    def ratio(self) -> float:
        return math.exp(self.log_ratio)

    @property
    def ci_ratio(self) -> tuple[float, float]:
        return (math.exp(self.ci_log[0]), math.exp(self.ci_log[1]))


@dataclass(frozen=True)
class RowStats:
    effect: Effect | None        # at the deciding look (the last one when none decided)
    noise_sd: float | None       # per-round sd of d (log units) behind the margin
    margin: float                # log units
    verdict: str
    decided_after: int | None    # kept rounds at the first decisive look; None: never decisive
    more_rounds: int | None      # when "too noisy": further rounds the current scatter suggests
    p_value: float | None = None  # of the test that decided, at the deciding look (deciding_p)
    p_test: str | None = None     # "t" (mean = 0: "faster", "slower", "too noisy") or "tost" ("no change")


def log_ratios(base: list[float], head: list[float]) -> np.ndarray:
    b, h = np.asarray(base, float), np.asarray(head, float)
    if b.shape != h.shape:
        raise ValueError("base and head need one value per round each")
    if np.any(b <= 0) or np.any(h <= 0):
        raise ValueError("speeds must be positive")
    # math.log (the C library's), not np.log: numpy's SIMD log differs in the last bit between CPUs (AVX-512
    # against AVX2), and a verdict and its JSON must be the same on every machine that re-analyses the rounds
    return np.array([math.log(x) for x in (h / b).tolist()], dtype=float)


def wilcoxon_p(d: np.ndarray) -> float | None:
    """Two-sided signed-rank p of d at a fixed n: informational, the verdict does not use it."""
    d = np.asarray(d, float)
    if len(d) < 2 or np.all(d == 0):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(stats.wilcoxon(d, alternative="two-sided").pvalue)


def t_quantile(n: int, plan: Plan) -> float:
    return float(stats.t.ppf(1.0 - plan.alpha_per_look / 2.0, n - 1))


def estimate(d: np.ndarray, plan: Plan = Plan(), *, p_value: bool = True) -> Effect | None:
    """Mean log-ratio and its CI at the plan's per-look confidence; None below MIN_ROUNDS values."""
    d = np.asarray(d, float)
    if len(d) < MIN_ROUNDS:
        return None
    mean, half = float(d.mean()), t_quantile(len(d), plan) * float(d.std(ddof=1)) / math.sqrt(len(d))
    return Effect(len(d), mean, (mean - half, mean + half), wilcoxon_p(d) if p_value else None)


def margin_for(noise_sd: float | None, min_effect: float = MIN_EFFECT) -> float:
    return max(min_effect, NOISE_K * noise_sd) if noise_sd is not None else min_effect


def verdict_for(effect: Effect | None, margin: float) -> str:
    if effect is None:
        return "insufficient data"
    lo, hi = effect.ci_log
    if -margin < lo and hi < margin:
        return "no change"
    if lo > 0:
        return "faster"
    if hi < 0:
        return "slower"
    return "too noisy"


def t_p(d: np.ndarray) -> float:
    """Two-sided one-sample t test of mean(d) = 0: below the per-look alpha exactly when the look's CI excludes 0."""
    d = np.asarray(d, float)
    mean, se = float(d.mean()), float(d.std(ddof=1)) / math.sqrt(len(d))
    if se == 0:
        return 1.0 if mean == 0 else 0.0
    return float(min(1.0, 2.0 * stats.t.sf(abs(mean) / se, len(d) - 1)))


def tost_p(d: np.ndarray, margin: float) -> float:
    """Equivalence (two one-sided t tests) of mean(d) inside ±margin, doubled so that it is below the per-look
    alpha exactly when the look's two-sided CI lies inside the band (the "no change" rule)."""
    d = np.asarray(d, float)
    mean, se = float(d.mean()), float(d.std(ddof=1)) / math.sqrt(len(d))
    if se == 0:
        return 0.0 if -margin < mean < margin else 1.0
    lower = stats.t.sf((mean + margin) / se, len(d) - 1)    # H0: mean <= -margin
    upper = stats.t.cdf((mean - margin) / se, len(d) - 1)   # H0: mean >= +margin
    return float(min(1.0, 2.0 * max(lower, upper)))


def deciding_p(d: np.ndarray, verdict: str, margin: float) -> tuple[float | None, str | None]:
    """(p, test) of the test behind `verdict` on d (the deciding look's rounds): what the bench table's `p` shows."""
    if verdict == "insufficient data" or len(d) < MIN_ROUNDS:
        return None, None
    if verdict == "no change":
        return tost_p(d, margin), "tost"
    return t_p(d), "t"


def rounds_needed(d: np.ndarray, margin: float, plan: Plan, limit: int = 10_000) -> int | None:
    """Kept rounds at which, if the mean and sd stayed as they are, the CI would fit inside the band or
    clear 0: what a "too noisy" row suggests. None when even `limit` rounds would not do."""
    d = np.asarray(d, float)
    mean, sd = abs(float(d.mean())), float(d.std(ddof=1))
    room = max(margin - mean, mean)   # the easier of: inside the band, or away from 0
    if sd == 0:
        return len(d)
    n = np.arange(max(MIN_ROUNDS, len(d)), limit + 1)
    ok = stats.t.ppf(1.0 - plan.alpha_per_look / 2.0, n - 1) * sd / np.sqrt(n) < room
    return int(n[np.argmax(ok)]) if ok.any() else None


SIGN_FLIP_EXACT_MAX = 16   # rounds up to which sign_flip_p enumerates every sign pattern (2^16); above, Hoeffding


@functools.lru_cache(maxsize=SIGN_FLIP_EXACT_MAX + 1)
def _sign_patterns(n: int) -> np.ndarray:
    """Every pattern of n signs (2^n x n, +1/-1)."""
    return (1 - 2 * ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1)).astype(float)


def sign_flip_p(d: np.ndarray) -> float:
    """Two-sided p of mean(d) = 0 by flipping the signs of the rounds: exact (every sign pattern) up to
    SIGN_FLIP_EXACT_MAX rounds, above that Hoeffding's bound 2 exp(-S^2 / (2 sum d^2)), which is never below the
    exact p. Valid whatever the noise's shape or its spells, as long as each round's order was drawn at random
    (pinset bench: bench_run.round_order): with no difference, swapping a round's order only flips its sign."""
    d = np.asarray(d, float)
    total, n = abs(float(d.sum())), len(d)
    if n == 0 or total == 0:
        return 1.0
    if n <= SIGN_FLIP_EXACT_MAX:
        sums = np.abs(_sign_patterns(n) @ d)
        return float(np.mean(sums >= total - 1e-12 * max(1.0, total)))
    return float(min(1.0, 2.0 * math.exp(-total ** 2 / (2.0 * float(d @ d)))))


def beyond_swings(d: np.ndarray, effect: Effect, sides: tuple[np.ndarray, np.ndarray] | None, plan: Plan) -> bool:
    """A "faster"/"slower" look may stand: its CI's bound nearest 0 lies beyond the largest jump between either
    side's own speed levels over these rounds (level_jump: a change no switch between the machine's speed levels
    can make), or the rounds' signs say so by themselves (sign_flip_p below the per-look alpha). A machine whose
    speed comes in spells can line a few rounds up to look like a change; these rounds then count as "too noisy"
    until the signs decide. sides None (rounds without their speeds): the t rule alone."""
    if sides is None:
        return True
    nearest = min(abs(effect.ci_log[0]), abs(effect.ci_log[1]))
    return nearest > level_jump(sides) or sign_flip_p(d) < plan.alpha_per_look


def level_jump(sides: tuple[np.ndarray, np.ndarray]) -> float:
    """The largest jump between a side's speed levels over these rounds: the widest gap between consecutive sorted
    ln(speed) values of either side (a machine switching between two levels shows the gap between them; noise
    around one level leaves small gaps)."""
    gaps = [float(np.diff(np.sort(side)).max()) for side in sides if len(side) > 1]
    return max(gaps) if gaps else 0.0


def decide(d: np.ndarray, plan: Plan = Plan(), *, noise_sd: float | None = None,
           min_effect: float = MIN_EFFECT, sides: tuple[np.ndarray, np.ndarray] | None = None) -> RowStats:
    """Walk the looks the plan allows (every prefix of d from first_look on, or only the full d for a
    one-look plan) and stop at the first decisive one. noise_sd: the machine's A/A noise (log units);
    None: each look's own scatter sets the margin. sides: ln(base speed) and ln(head speed) of the rounds of d
    (with plan.signs, rounds whose order was drawn: beyond_swings, a "faster"/"slower" within the sides' own swings
    needs the signs' word too)."""
    d = np.asarray(d, float)
    looks = range(max(plan.first_look, MIN_ROUNDS), len(d) + 1) if plan.looks > 1 else []
    looks = looks or [len(d)]   # one look: the full data (also a sequential bench stopped before its first look)
    effect, sd, margin = None, noise_sd, margin_for(noise_sd, min_effect)
    for n in looks:
        effect = estimate(d[:n], plan, p_value=False)
        if effect is None:
            continue
        if noise_sd is None:
            sd = float(d[:n].std(ddof=1))
            margin = margin_for(sd, min_effect)
        verdict = verdict_for(effect, margin)
        if verdict in ("faster", "slower") and plan.signs and not beyond_swings(
                d[:n], effect, None if sides is None else (sides[0][:n], sides[1][:n]), plan):
            verdict = "too noisy"
        if verdict != "too noisy":
            return RowStats(estimate(d[:n], plan), sd, margin, verdict, n, None, *deciding_p(d[:n], verdict, margin))
    if effect is None:
        return RowStats(None, sd, margin, "insufficient data", None, None)
    effect = estimate(d, plan)
    needed = rounds_needed(d, margin, plan)
    if plan.signs and effect is not None and (effect.ci_log[0] > 0 or effect.ci_log[1] < 0) and needed is not None:
        # the t CI decided, the signs not yet (beyond_swings): rounds all one way need 1 + log2(1 / alpha per look)
        needed = max(needed, math.ceil(1 + math.log2(1.0 / plan.alpha_per_look)))
    return RowStats(effect, sd, margin, "too noisy", None, None if needed is None else max(1, needed - len(d)),
                    *deciding_p(d, "too noisy", margin))


def compare(base: list[float], head: list[float], plan: Plan = Plan(), *, noise_sd: float | None = None,
            min_effect: float = MIN_EFFECT) -> RowStats:
    """Everything for one benchmark row (base[i], head[i] from the same round)."""
    n = min(len(base), len(head))
    sides = (np.array([math.log(x) for x in base[:n]]), np.array([math.log(x) for x in head[:n]])) if n else None
    return decide(log_ratios(base[:n], head[:n]), plan, noise_sd=noise_sd, min_effect=min_effect, sides=sides)
