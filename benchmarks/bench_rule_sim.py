"""Check the bench decision rule (pinset/measures/stats.py) by simulation at the noise measured on the H200.

    PYTHONPATH=. python benchmarks/bench_rule_sim.py [--trials 400] [--max-rounds 40]

Each trial is one `pinset bench` that stops at the first round after which the row is decisive (first look
after 5 kept rounds) or at the round cap (--max-rounds, warm-up included, so max-rounds - 1 kept rounds).
sigma: sd of one kept round's ln(head/base). Recorded H200 rounds (reports/h200, 4-16-layer models): pp rows
2-9 %, tg128 0.2-2.5 %, with single rounds 10-25 % off; tails: normal, t3 (Student t, 3 d.o.f.), or
normal + 5 % of rounds shifted by 5 sd. Requirement: A/A "no change" >= 95 %, a true 3 % change called in the
right direction >= 90 % within the round cap.
"""

import argparse

import numpy as np

from pinset.measures.stats import ALPHA, NOISE_K, RULE, Plan
from pinset.measures.stats_sim import sequential_trials


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--max-rounds", type=int, default=40)
    args = ap.parse_args()
    kept = args.max_rounds - 1
    plan = Plan.adaptive(kept, 5)
    print(f"command: PYTHONPATH=. python benchmarks/bench_rule_sim.py --trials {args.trials} --max-rounds {args.max_rounds}")
    print(f"rule {RULE}: alpha {ALPHA} over {plan.looks} looks ({plan.alpha_per_look:.5f} each), "
          f"margin ±max(1 %, {NOISE_K:g} x per-round sd), {kept} kept rounds at most, {args.trials} trials per cell")
    print(f"{'sigma':>6} {'tails':>10} {'effect':>7} | {'no change':>9} {'faster':>6} {'slower':>6} {'too noisy':>9}"
          f" | {'right':>5} | rounds median / p90 / max")
    for sigma in (0.002, 0.005, 0.01, 0.02, 0.03, 0.04):
        for tails, outliers in (("normal", 0.0), ("t3", 0.0), ("outliers", 0.05)):
            for effect in (1.0, 1.03, 0.97):
                rates, used = sequential_trials(sigma, effect, max_kept=kept, tails=tails, outliers=outliers,
                                                trials=args.trials, seed=1)
                right = rates.get({1.0: "no change", 1.03: "faster", 0.97: "slower"}[effect], 0.0)
                print(f"{sigma:>6.3f} {tails:>10} {effect:>7.2f} | {rates.get('no change', 0):>9.3f} "
                      f"{rates.get('faster', 0):>6.3f} {rates.get('slower', 0):>6.3f} {rates.get('too noisy', 0):>9.3f}"
                      f" | {right:>5.3f} | {int(np.median(used))} / {int(np.percentile(used, 90))} / {used.max()}")


if __name__ == "__main__":
    main()
