"""pinset sim vs a plain `worktree checkout + git am -3` loop, on real llama.cpp snapshots.

Both sides get the same builds (llama.cpp 0c1e57098 / 4df29be4f / e3546c794 from the
llama-cpp-python sdists) and the same 13 pins, in the same run, with a warm cache. pinset does
strictly more: besides the applies it attributes conflicts, checks retirement and the contract.
Prints the times and the ratio.   Usage: python benchmarks/sim_speed.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from snapshots import SNAPSHOTS, build_name, import_snapshots, make_backport_pins  # noqa: E402
from pinset.store import Store  # noqa: E402

GIT_ENV = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b", "GIT_CONFIG_GLOBAL": "/dev/null"}


def pinset_sim(cfg: Path, cache: Path, builds: list[str]) -> float:
    env = dict(os.environ, PINSET_CACHE=str(cache))
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pinset", "sim", "-c", str(cfg), "--builds", ",".join(builds),
                           "--json", os.devnull], env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        sys.exit(f"pinset sim failed: {proc.stderr}")
    return elapsed


def plain_loop(mirror: Path, oids: list[str], pin_dirs: list[Path]) -> float:
    """Per build: check out a worktree, `git am -3` every pin (abort and go on when one fails)."""
    env = dict(os.environ, **GIT_ENV)
    started = time.perf_counter()
    for oid in oids:
        with tempfile.TemporaryDirectory() as wt:
            subprocess.run(["git", "--git-dir", str(mirror), "worktree", "add", "-q", "--detach", wt, oid],
                           check=True, env=env)
            for pin in pin_dirs:
                patches = sorted(str(p) for p in pin.glob("*.patch"))
                if subprocess.run(["git", "am", "-q", "-3", *patches], cwd=wt, env=env,
                                  capture_output=True).returncode != 0:
                    subprocess.run(["git", "am", "--abort"], cwd=wt, env=env, capture_output=True)
        subprocess.run(["git", "--git-dir", str(mirror), "worktree", "prune"], check=True, env=env)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pinset-bench-"))
    store = Store.open(work / "cache")
    builds = import_snapshots(store)
    series = REPO / "patches" / "cuda-mmq-iq1m"
    ours = [series] if series.is_dir() else []
    pins = ours + make_backport_pins(store, builds["0.3.35"], builds["0.3.36"], work / "pins", count=13 - len(ours))
    cfg = work / "pins.yaml"
    names = [build_name(v) for v in SNAPSHOTS]
    cfg.write_text("builds: [" + ", ".join(names) + "]\npins:\n"
                   + "".join(f"  - id: {p.name}\n    patches: {p}\n" for p in pins))
    oids = [builds[v].oid for v in SNAPSHOTS]
    pinset_sim(cfg, store.root, names)  # warm-up: PR/patch caches, page cache
    plain_loop(store.mirror, oids, pins)
    sim3, sim1, loop3 = [], [], []
    for _ in range(args.repeat):  # interleaved, same run
        sim3.append(pinset_sim(cfg, store.root, names))
        loop3.append(plain_loop(store.mirror, oids, pins))
        sim1.append(pinset_sim(cfg, store.root, names[:1]))
    s3, s1, l3 = (statistics.median(x) for x in (sim3, sim1, loop3))
    print(f"pins: {len(pins)}  builds: {len(names)}  repeats: {args.repeat}  cores: {os.cpu_count()}")
    print(f"pinset sim, 3 builds (applies + attribution + retirement + contracts): median {s3:.2f} s  {sorted(round(x, 2) for x in sim3)}")
    print(f"plain loop, 3 builds (worktree checkout + git am -3 only):            median {l3:.2f} s  {sorted(round(x, 2) for x in loop3)}")
    print(f"pinset sim, 1 build: median {s1:.2f} s -> cost per extra build {(s3 - s1) / 2:.2f} s")
    print(f"ratio plain/pinset: {l3 / s3:.2f}x")


if __name__ == "__main__":
    main()
