"""Statistics for interleaved base/head benchmark rounds, kept apart from the runner so they can be
checked on recorded and simulated rounds.

Model: round r gives one base speed b_r and one head speed h_r measured back to back (order flipped
every round), so d_r = ln(h_r / b_r) cancels what drifts slowly (clocks, temperature, other load).
- effect: Hodges-Lehmann estimate of d (median of Walsh averages), reported as ratio exp(d) (>1 faster).
- 95 % CI: the distribution-free interval that inverts scipy's Wilcoxon signed-rank test when n >= 6
  (with n <= 5 no interval from signed ranks reaches 95 %); with 3..5 rounds, the Student t interval
  of the mean log-ratio (scipy.stats.ttest_1samp).
- p-value: scipy.stats.wilcoxon on d (two-sided).
- A/A spread: the largest |CI bound| that a comparison of the *same* binary with itself over n rounds
  reaches: a typical CI half-width plus a 99 % bound on the A/A centre (99 %, not 95 %, so that with
  the noise itself estimated from few rounds A/A still says "no change" >= 95 % of the time).
  The run-to-run noise comes from base-vs-base pairs (the base runs of consecutive rounds,
  ln(b_{r+1}/b_r)), pooled with the scatter of the head-vs-base log-ratios around their centre
  (same variance under A/A, more degrees of freedom):
      spread = (t_{0.975,n-1} + t_{0.995,df}) * s_pooled / sqrt(n)
  Consecutive rounds are further apart in time than the two runs of one round, so drift makes the
  spread larger, never smaller.
- verdict: "no change" when the CI lies inside ±max(1 %, A/A spread); "faster"/"slower" when it is
  not and excludes 0; otherwise "too noisy". When the band is wider than MAX_NO_CHANGE_BAND (5 %:
  "no change" would then hide real 5-10 % changes) the machine is too noisy: only a CI entirely beyond
  the band gives "faster"/"slower", anything else is "too noisy". < 3 kept rounds: "insufficient data".
  Checked by benchmarks/stats_aa.py and tests/test_stats.py: A/A comes out
  "no change" in >= 95 % of simulated trials at realistic noise, a 10 % slowdown comes out "slower".
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats

MIN_ROUNDS = 3
MIN_EFFECT = math.log(1.01)            # 1 %: smaller changes are not worth a verdict
MAX_NO_CHANGE_BAND = math.log(1.05)    # a wider "no change" band means the machine is too noisy
AA_QUANTILE = 0.995                    # two-sided 99 % bound on where an A/A centre lands
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Effect:
    n: int
    log_ratio: float
    ci_log: tuple[float, float]
    p_value: float | None
    ci_method: str  # "wilcoxon" | "t" | "none"

    @property
    def ratio(self) -> float:
        return math.exp(self.log_ratio)

    @property
    def ci_ratio(self) -> tuple[float, float]:
        return (math.exp(self.ci_log[0]), math.exp(self.ci_log[1]))

    @property
    def extent(self) -> float:
        """Largest distance of the CI from 0 (log units)."""
        return max(abs(self.ci_log[0]), abs(self.ci_log[1]))


@dataclass(frozen=True)
class RowStats:
    effect: Effect | None
    aa_spread: float | None      # log units
    aa_noise: float | None       # pooled run-to-run sd of a log-ratio (log units)
    threshold: float             # log units: max(1 %, A/A spread)
    verdict: str


def log_ratios(base: list[float], head: list[float]) -> np.ndarray:
    b, h = np.asarray(base, float), np.asarray(head, float)
    if b.shape != h.shape:
        raise ValueError("base and head need one value per round each")
    if np.any(b <= 0) or np.any(h <= 0):
        raise ValueError("speeds must be positive")
    return np.log(h / b)


def walsh_averages(d: np.ndarray) -> np.ndarray:
    i, j = np.triu_indices(len(d))
    return np.sort((d[i] + d[j]) / 2.0)


def hodges_lehmann(d: np.ndarray) -> float:
    return float(np.median(walsh_averages(np.asarray(d, float))))


def wilcoxon_p(d: np.ndarray) -> float | None:
    d = np.asarray(d, float)
    if len(d) < 2 or np.all(d == 0):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(stats.wilcoxon(d, alternative="two-sided").pvalue)


def wilcoxon_ci(d: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The shifts m for which scipy's signed-rank test of d - m is not rejected: an interval between
    Walsh averages. None when even the widest such interval has confidence below `confidence` (n <= 5)."""
    d = np.asarray(d, float)
    w = np.unique(walsh_averages(d))
    alpha = 1.0 - confidence
    # The test statistic only changes at Walsh averages: probe each gap between them once.
    span = (w[-1] - w[0]) or max(abs(w[0]), 1.0)
    probes = np.concatenate(([w[0] - span], (w[:-1] + w[1:]) / 2.0, [w[-1] + span]))
    # Acceptance is an interval of probes around the HL estimate (the statistic is monotone in the
    # shift): bisect for its two ends instead of testing every gap.
    def ok(k: int) -> bool:
        p = wilcoxon_p(d - probes[k])
        return p is not None and p >= alpha

    centre = int(np.searchsorted(probes, hodges_lehmann(d)))
    centre = min(max(centre, 1), len(probes) - 2)
    if not ok(centre):
        centre = next((k for k in range(1, len(probes) - 1) if ok(k)), None)
        if centre is None:
            return None
    if ok(0) or ok(len(probes) - 1):
        return None
    lo_k, hi_k = 0, centre          # ok(lo_k) False, ok(hi_k) True
    while hi_k - lo_k > 1:
        mid = (lo_k + hi_k) // 2
        lo_k, hi_k = (lo_k, mid) if ok(mid) else (mid, hi_k)
    first = hi_k
    lo_k, hi_k = centre, len(probes) - 1   # ok(lo_k) True, ok(hi_k) False
    while hi_k - lo_k > 1:
        mid = (lo_k + hi_k) // 2
        lo_k, hi_k = (mid, hi_k) if ok(mid) else (lo_k, mid)
    last = lo_k
    return float(w[first - 1]), float(w[last])


def t_ci(d: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    d = np.asarray(d, float)
    if np.all(d == d[0]):
        return float(d[0]), float(d[0])
    ci = stats.ttest_1samp(d, 0.0).confidence_interval(confidence)
    return float(ci.low), float(ci.high)


def estimate(d: np.ndarray, confidence: float = CONFIDENCE) -> Effect | None:
    """HL effect + CI + Wilcoxon p for paired log-ratios; None with fewer than MIN_ROUNDS values."""
    d = np.asarray(d, float)
    if len(d) < MIN_ROUNDS:
        return None
    ci, method = wilcoxon_ci(d, confidence), "wilcoxon"
    if ci is None:
        ci, method = t_ci(d, confidence), "t"
    return Effect(len(d), hodges_lehmann(d), ci, wilcoxon_p(d), method)


def aa_spread(base: list[float], head_vs_base: np.ndarray | None = None) -> tuple[float, float] | None:
    """(spread, pooled sd) from base-vs-base pairs of consecutive rounds (+ head-vs-base scatter)."""
    b = np.asarray(base, float)
    if len(b) < MIN_ROUNDS:
        return None
    aa = np.log(b[1:] / b[:-1])
    ss, df = float(((aa - aa.mean()) ** 2).sum()), len(aa) - 1
    n = len(b)
    if head_vs_base is not None and len(head_vs_base) >= 2:
        d = np.asarray(head_vs_base, float)
        ss += float(((d - d.mean()) ** 2).sum())
        df += len(d) - 1
        n = len(d)
    if df < 1:
        return None
    sd = math.sqrt(ss / df)
    spread = (stats.t.ppf(0.975, n - 1) + stats.t.ppf(AA_QUANTILE, df)) * sd / math.sqrt(n)
    return float(spread), sd


def verdict_for(effect: Effect | None, threshold: float) -> str:
    if effect is None:
        return "insufficient data"
    lo, hi = effect.ci_log
    if threshold > MAX_NO_CHANGE_BAND:
        # A noisy machine: only an effect beyond the whole noise band is believable.
        return "faster" if lo > threshold else "slower" if hi < -threshold else "too noisy"
    if -threshold < lo and hi < threshold:
        return "no change"
    if lo > 0:
        return "faster"
    if hi < 0:
        return "slower"
    return "too noisy"


def compare(base: list[float], head: list[float], *, aa_base: list[float] | None = None,
            min_effect: float = MIN_EFFECT) -> RowStats:
    """Everything for one benchmark row (base[i], head[i] from the same round)."""
    n = min(len(base), len(head))
    d = log_ratios(base[:n], head[:n]) if n else np.array([])
    effect = estimate(d) if n else None
    aa = aa_spread(aa_base if aa_base is not None else base[:n], d)
    spread, noise = aa if aa else (None, None)
    threshold = max(min_effect, spread or 0.0)
    return RowStats(effect, spread, noise, threshold, verdict_for(effect, threshold))
