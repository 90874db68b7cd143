"""Print how often the bench statistics say "no change" for A/A runs and "slower" for a 10 % slowdown.

    python benchmarks/stats_aa.py [--trials 400]

sigma: sd of one run's log speed; drift: sd of a per-round shift shared by both runs of the round;
rounds: kept rounds (the default `pinset bench --rounds 6` keeps 5).
"""

import argparse

from pinset.measures.stats_sim import verdict_rates


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=400)
    args = ap.parse_args()
    print(f"{'rounds':>6} {'sigma':>6} {'drift':>6} {'tails':>6} | {'A/A no change':>13} {'A/A faster/slower':>17}"
          f" | {'-10% slower':>11}")
    for n in (5, 8, 12):
        for sigma in (0.002, 0.005, 0.01, 0.02):
            for drift in (0.0, 0.01):
                for heavy in (False, True):
                    aa = verdict_rates(n, sigma, 1.0, drift=drift, heavy_tails=heavy, trials=args.trials, seed=1)
                    slow = verdict_rates(n, sigma, 0.9, drift=drift, heavy_tails=heavy, trials=args.trials, seed=2)
                    wrong = aa.get("faster", 0) + aa.get("slower", 0)
                    print(f"{n:>6} {sigma:>6.3f} {drift:>6.3f} {'t3' if heavy else 'normal':>6} | "
                          f"{aa.get('no change', 0):>13.3f} {wrong:>17.3f} | {slow.get('slower', 0):>11.3f}")


if __name__ == "__main__":
    main()
