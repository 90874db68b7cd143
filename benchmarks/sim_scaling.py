"""How `pinset sim` grows with builds and pins, side by side with the plain git loop, in one run.

A SYNTHETIC upstream (made here with git fast-import): 400 C files of ~120 lines, 16 builds (tags
b01..b16, each commit rewriting lines of 12 files), and 40 pins, each a one-patch edit of its own
file made on b01; upstream later rewrites the lines some pins edit (conflicts from then on, attributed
to upstream) and lands two pins' edits itself (retired). For builds x pins in {1, 4, 16} x {1, 10, 40}
it times a warm `pinset sim` and the plain loop (per build a worktree checkout, then `git am -3` of each
pin), and prints the cost of each added build and each added pin for both.

Usage: python benchmarks/sim_scaling.py [--repeat N] [--work DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from plain_git import GIT_ENV, pinset_sim, plain_loop, write_pins  # noqa: E402

FILES, LINES, BUILDS, PINS = 400, 120, 16, 40
BUILD_COUNTS, PIN_COUNTS = (1, 4, 16), (1, 10, 40)


def source(i: int, line: int, version: int = 0) -> str:
    return f"    int value_{i}_{line} = compute_{i}({line}, {version}); /* file {i} line {line} */\n"


def make_upstream(dest: Path) -> Path:
    rng = random.Random(19)
    files = {i: [f"/* module {i} */\n", f"int compute_{i}(int a, int b);\n", f"int body_{i}(void) {{\n"]
             + [source(i, n) for n in range(LINES)] + ["    return 0;\n", "}\n"] for i in range(FILES)}
    stream, when = [], 1_760_000_000
    for b in range(1, BUILDS + 1):
        changed = range(FILES) if b == 1 else rng.sample(range(40, FILES), 10)
        if b > 1:
            for i in changed:
                for n in rng.sample(range(LINES), 3):
                    files[i][3 + n] = source(i, n, b)
        extra = []
        if b > 1 and b % 3 == 0:  # upstream rewrites the line a pin edits: a conflict from here on
            victim = b // 3 * 2
            files[victim][3 + 10] = source(victim, 10, 100 + b)
            extra.append(victim)
        if b in (8, 12):  # upstream lands a pin's own edit: the pin retires from here on
            landed = 30 + b // 4
            files[landed][3 + 10] = pin_line(landed)
            extra.append(landed)
        when += 3600
        body = [f"commit refs/heads/master\ncommitter u <u@u> {when} +0000\ndata 8\nbuild {b:02}\n"]
        for i in sorted(set(changed) | set(extra)):
            data = "".join(files[i]).encode()
            body.append(f"M 100644 inline src/mod{i:03}.c\ndata {len(data)}\n{data.decode()}\n")
        body.append(f"reset refs/tags/b{b:02}\nfrom refs/heads/master\n\n")
        stream.append("".join(body))
    subprocess.run(["git", "init", "-q", "--bare", str(dest)], check=True)
    subprocess.run(["git", "--git-dir", str(dest), "fast-import", "--quiet"], input="".join(stream).encode(), check=True,
                   env=dict(os.environ, **GIT_ENV))
    return dest


def pin_line(i: int) -> str:
    return f"    int value_{i}_10 = compute_{i}(10, -1); /* file {i} line 10, pinned */\n"


def make_pins(upstream: Path, dest: Path) -> list[Path]:
    """40 one-patch pins made on b01, each editing line 10 of its own file."""
    env = dict(os.environ, **GIT_ENV)
    wt = dest / "wt"
    subprocess.run(["git", "--git-dir", str(upstream), "worktree", "add", "-q", "--detach", str(wt), "b01"], check=True, env=env)
    pins = []
    for i in range(PINS):
        path = wt / f"src/mod{i:03}.c"
        lines = path.read_text().splitlines(True)
        lines[3 + 10] = pin_line(i)
        path.write_text("".join(lines))
        subprocess.run(["git", "commit", "-q", "-am", f"pin {i}"], cwd=wt, check=True, env=env)
        folder = dest / f"pin{i:02}"
        folder.mkdir()
        subprocess.run(["git", "format-patch", "-q", "-1", "-o", str(folder)], cwd=wt, check=True, env=env)
        subprocess.run(["git", "reset", "-q", "--hard", "b01"], cwd=wt, check=True, env=env)
        pins.append(folder)
    shutil.rmtree(wt)
    subprocess.run(["git", "--git-dir", str(upstream), "worktree", "prune"], check=True, env=env)
    return pins


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", help="work folder (default: a new temp folder, removed)")
    args = parser.parse_args()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="pinset-scaling-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        upstream = make_upstream(work / "upstream.git")
        pins = make_pins(upstream, work / "pins")
        cache = work / "cache"
        tags = [f"b{b:02}" for b in range(1, BUILDS + 1)]
        oids = subprocess.run(["git", "--git-dir", str(upstream), "rev-parse", *tags], capture_output=True, text=True,
                              check=True).stdout.split()

        def cfg(nb: int, np_: int) -> Path:
            return write_pins(work / f"pins-{nb}x{np_}.yaml", tags[-nb:], pins[:np_], upstream)

        pinset_sim(cfg(BUILDS, PINS), cache)  # fetches every build once: the rest is warm
        grid_sim: dict[tuple[int, int], list[float]] = {}
        grid_loop: dict[tuple[int, int], list[float]] = {}
        load = os.getloadavg()
        for _ in range(args.repeat):
            for nb in BUILD_COUNTS:
                for np_ in PIN_COUNTS:  # interleaved: pinset, then the loop, for each cell
                    grid_sim.setdefault((nb, np_), []).append(pinset_sim(cfg(nb, np_), cache))
                    grid_loop.setdefault((nb, np_), []).append(plain_loop(upstream, oids[-nb:], pins[:np_]))
        s = {k: statistics.median(v) for k, v in grid_sim.items()}
        loop = {k: statistics.median(v) for k, v in grid_loop.items()}
        print(f"SYNTHETIC upstream: {FILES} files x ~{LINES} lines, {BUILDS} builds; {PINS} one-patch pins. "
              f"cores {os.cpu_count()}, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; "
              f"medians of {args.repeat}, warm cache")
        print("seconds: pinset sim | plain loop (worktree checkout + git am -3) | ratio plain/pinset")
        print("builds \\ pins " + "".join(f"{p:>26}" for p in PIN_COUNTS))
        for nb in BUILD_COUNTS:
            print(f"{nb:>13} " + "".join(f"{s[nb, p]:>8.2f} | {loop[nb, p]:>6.2f} | {loop[nb, p] / s[nb, p]:>5.1f}x"
                                          for p in PIN_COUNTS))
        lo, hi = BUILD_COUNTS[0], BUILD_COUNTS[-1]
        for p in PIN_COUNTS:
            print(f"per added build ({p:2} pins): pinset {(s[hi, p] - s[lo, p]) / (hi - lo):.3f} s, "
                  f"plain loop {(loop[hi, p] - loop[lo, p]) / (hi - lo):.3f} s")
        lo, hi = PIN_COUNTS[0], PIN_COUNTS[-1]
        for b in BUILD_COUNTS:
            print(f"per added pin ({b:2} builds): pinset {(s[b, hi] - s[b, lo]) / (hi - lo):.3f} s, "
                  f"plain loop {(loop[b, hi] - loop[b, lo]) / (hi - lo):.3f} s")
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
