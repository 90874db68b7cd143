"""Check the bench decision rule (pinset/measures/stats.py) by simulation at the noise measured on the H200.

    PYTHONPATH=. python benchmarks/bench_rule_sim.py [--trials 400] [--max-rounds 40] [--round-seconds S --max-time 300]

Each trial is one `pinset bench` that stops at the first round after which the row is decisive (first look
after 5 kept rounds) or at the round cap (--max-rounds, warm-up included, so max-rounds - 1 kept rounds).
sigma: sd of one kept round's ln(head/base). Recorded H200 rounds (reports/h200, 4-16-layer models): pp rows
2-9 %, tg128 0.2-2.5 %, with single rounds 10-25 % off; tails: normal, t3 (Student t, 3 d.o.f.), or
normal + 5 % of rounds shifted by 5 sd. Requirement: A/A "no change" >= 95 %, a true 3 % change called in the
right direction >= 90 % within the round cap.

--round-seconds S models the time budget too: a bench whose rounds take S seconds stops after
floor(--max-time / S) rounds (pinset bench starts no round that would end past --max-time), so it keeps fewer
rounds than the cap while the alpha stays spread over the cap's looks. The 48-layer synthetic Qwen3-30B-A3B with
`-p 512,2048 -n 128 -r 3` takes 15-19 s a round on the H200 (reports/bench-decides).

--spells: noise that comes in spells instead (pinset/measures/stats_sim.py spell_trials): the machine's speed
switches between two levels (ratio 1.29) with dwell times drawn from the H100 A/A round log
(tests/fixtures/llama-bench/h100-spells/bench-aa-run2.json, pp512), stretched 1-8 times, and each round's order
alternating (BH, HB, ... as pinset bench ran before) or drawn at random (as it runs now); A/A (effect 1.0): the
false "faster"/"slower" rate, <= 2 % promised; and a true 1.5x change.
"""

import argparse

import numpy as np

from pinset.measures.rule import ALPHA, NOISE_K, RULE, Plan
from pinset.measures.stats_sim import SPELLS_H100, sequential_trials, spell_trials


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--max-rounds", type=int, default=40)
    ap.add_argument("--round-seconds", type=float, default=None, help="seconds a round takes (models --max-time)")
    ap.add_argument("--max-time", type=float, default=300.0, help="the bench's --max-time (default 300, pinset's)")
    ap.add_argument("--spells", action="store_true", help="noise in spells (a two-level regime) instead")
    args = ap.parse_args()
    if args.spells:
        spells(args)
        return
    plan_kept = args.max_rounds - 1
    rounds = args.max_rounds if not args.round_seconds else min(args.max_rounds, max(1, int(args.max_time // args.round_seconds)))
    kept = rounds - 1
    plan = Plan.adaptive(plan_kept, 5)
    timing = f" --round-seconds {args.round_seconds:g} --max-time {args.max_time:g}" if args.round_seconds else ""
    print(f"command: PYTHONPATH=. python benchmarks/bench_rule_sim.py --trials {args.trials} --max-rounds {args.max_rounds}{timing}")
    print(f"rule {RULE}: alpha {ALPHA} over {plan.looks} looks ({plan.alpha_per_look:.5f} each), "
          f"margin ±max(1 %, {NOISE_K:g} x per-round sd), {kept} kept rounds at most"
          + (f" ({rounds} rounds of {args.round_seconds:g} s in {args.max_time:g} s)" if args.round_seconds else "")
          + f", {args.trials} trials per cell")
    print(f"{'sigma':>6} {'tails':>10} {'effect':>7} | {'no change':>9} {'faster':>6} {'slower':>6} {'too noisy':>9}"
          f" | {'right':>5} | rounds median / p90 / max")
    for sigma in (0.002, 0.005, 0.01, 0.02, 0.03, 0.04):
        for tails, outliers in (("normal", 0.0), ("t3", 0.0), ("outliers", 0.05)):
            for effect in (1.0, 1.03, 0.97):
                rates, used = sequential_trials(sigma, effect, max_kept=kept, tails=tails, outliers=outliers,
                                                trials=args.trials, seed=1, plan_kept=plan_kept)
                right = rates.get({1.0: "no change", 1.03: "faster", 0.97: "slower"}[effect], 0.0)
                print(f"{sigma:>6.3f} {tails:>10} {effect:>7.2f} | {rates.get('no change', 0):>9.3f} "
                      f"{rates.get('faster', 0):>6.3f} {rates.get('slower', 0):>6.3f} {rates.get('too noisy', 0):>9.3f}"
                      f" | {right:>5.3f} | {int(np.median(used))} / {int(np.percentile(used, 90))} / {used.max()}")


def spells(args) -> None:
    kept = args.max_rounds - 1
    print(f"command: PYTHONPATH=. python benchmarks/bench_rule_sim.py --spells --trials {args.trials} "
          f"--max-rounds {args.max_rounds}")
    s = SPELLS_H100
    print(f"rule {RULE}: alpha {ALPHA} over {Plan.adaptive(kept, 5).looks} looks, {kept} kept rounds at most, "
          f"{args.trials} trials per cell")
    print(f"regime (H100 A/A pp512): levels x{s.level_ratio}, within-level sd {s.within_sd}, high share "
          f"{s.high_share}, dwell low {s.dwell_low}, high {s.dwell_high} runs (x scale)")
    print(f"{'order':>9} {'scale':>5} {'effect':>6} | {'no change':>9} {'faster':>6} {'slower':>6} {'too noisy':>9}"
          f" | {'false':>5} {'right':>5} | rounds median / p90 / max")
    for order in ("alternate", "random"):
        for scale in (1, 2, 3, 4, 8):
            for effect in (1.0, 1.5):
                rates, used = spell_trials(effect, max_kept=kept, scale=scale, order=order, trials=args.trials,
                                           seed=1)
                false = rates.get("faster", 0) + rates.get("slower", 0) if effect == 1.0 else rates.get("slower", 0)
                right = rates.get("no change" if effect == 1.0 else "faster", 0.0)
                print(f"{order:>9} {scale:>5} {effect:>6.2f} | {rates.get('no change', 0):>9.3f} "
                      f"{rates.get('faster', 0):>6.3f} {rates.get('slower', 0):>6.3f} {rates.get('too noisy', 0):>9.3f}"
                      f" | {false:>5.3f} {right:>5.3f} | {int(np.median(used))} / {int(np.percentile(used, 90))} / "
                      f"{used.max()}")


if __name__ == "__main__":
    main()
