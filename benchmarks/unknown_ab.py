"""`pinset sim` of builds not known (the whole-build memo emptied before each run; apply memo, moved-code
indexes and mirror warm) for several pinset source trees, interleaved in the same rounds on one cache: what
a change costs a run whose builds are new. Uses a work folder benchmarks/sim_speed.py left (--work).

Usage: python benchmarks/unknown_ab.py WORK TREE [TREE ...] [--repeat N] [--configs pins.yaml,queue.yaml,many.yaml]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from plain_git import pinset_sim, processes  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("work", type=Path)
    parser.add_argument("trees", type=Path, nargs="+")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--configs", default="pins.yaml,queue.yaml,many.yaml")
    args = parser.parse_args()
    cache = args.work / "cache"
    for name in args.configs.split(","):
        cfg = args.work / name
        times: dict[Path, list[float]] = {tree: [] for tree in args.trees}
        for tree in args.trees:   # warm-up: each tree's apply memo answers
            shutil.rmtree(cache / "memo" / "build", ignore_errors=True)
            pinset_sim(cfg, cache, src=tree)
        for _ in range(args.repeat):
            for tree in args.trees:
                shutil.rmtree(cache / "memo" / "build", ignore_errors=True)
                times[tree].append(pinset_sim(cfg, cache, src=tree))
        print(f"== {name}: builds not known, {args.repeat} interleaved rounds")
        for tree in args.trees:
            shutil.rmtree(cache / "memo" / "build", ignore_errors=True)
            total, gits = processes(lambda prefix, tree=tree: pinset_sim(cfg, cache, src=tree, prefix=prefix))
            print(f"{str(tree):<24} median {statistics.median(times[tree]):6.2f} s  "
                  f"{sorted(round(t, 2) for t in times[tree])}  programs {total} ({gits} git)")


if __name__ == "__main__":
    main()
