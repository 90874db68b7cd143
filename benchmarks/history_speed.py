"""`pinset history` at the scale of a year: 365 nights x 50 pins x 4 builds (the sim of each night), with a
bench of 3 benchmarks, a KLD and a forecast per night, in the layout the nightly keeps (DIR/<night>/*.json).

Each night's files are a real result night of tests/testing/nights.py (`--from`, written by the verbs
themselves) widened to the shape: its sim's pins copied to 50 pins and its builds to 4 (states, digests and
apply modes varied by night so pins go red, get refreshed and turn green), its bench, kld and forecast kept as
they are, every file's start time moved to its night. Then `pinset history DIR --html --markdown --json` runs
in a child process (imports included, as a user runs it), REPEAT times; the median wall time, each one, and
the median CPU time of the child (what a busy machine does not inflate) are printed.

Usage: python benchmarks/history_speed.py [--nights 365] [--pins 50] [--builds 4] [--repeat 3] [--work DIR]
       [--from RESULTS]   (without it, the nights are written first: about a minute)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

STATES = ("applied", "applied", "applied", "conflict", "upstream", "applied", "applied", "applied")


def widen(sim: dict, night: int, pins: int, builds: int) -> dict:
    template = sim["builds"][0]["pins"][0]
    out = []
    for b in range(builds):
        rows = []
        for i in range(pins):
            state = STATES[(night // 7 + i * 3 + b) % len(STATES)] if (i + night) % 5 == 0 else "applied"
            rows.append({**template, "id": f"pin-{i:02d}", "status": state,
                         "digest": f"{(i * 7919 + night // (20 + i)) & 0xffffffffffff:016x}",
                         "apply_mode": ("offset" if (i + b + night) % 11 == 0 else "exact") if state == "applied" else None})
            if rows[-1]["apply_mode"] is None:
                rows[-1].pop("apply_mode")
        out.append({"build": f"b{night + b}", "commit": f"{night + b:040x}", "ok": True, "pins": rows})
    return {**sim, "builds": out}


def write_year(source: Path, dest: Path, nights: int, pins: int, builds: int) -> None:
    sources = sorted(p for p in source.iterdir() if p.is_dir())
    start = date(2026, 1, 1)
    for n in range(nights):
        night = start + timedelta(days=n)
        folder = dest / night.isoformat()
        folder.mkdir(parents=True)
        src = sources[n % len(sources)]
        for f in src.glob("*.json"):
            try:
                doc = json.loads(f.read_text())
            except ValueError:
                continue
            if doc.get("kind") not in ("sim", "bench", "kld", "forecast", "verify"):
                continue
            doc["started"] = f"{night.isoformat()}T02:17:00Z"
            if doc["kind"] == "sim":
                doc = widen(doc, n, pins, builds)
            (folder / f.name).write_text(json.dumps(doc))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nights", type=int, default=365)
    ap.add_argument("--pins", type=int, default=50)
    ap.add_argument("--builds", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", type=Path)
    ap.add_argument("--from", dest="source", type=Path, help="a results folder of tests/testing/nights.py")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="pinset-history-bench-"))
    source = args.source
    if source is None:
        from tests.testing.nights import make_nights

        source = make_nights(work / "real", verify=False)
    year = work / "year"
    if not year.exists():
        write_year(source, year, args.nights, args.pins, args.builds)
    files = sum(1 for _ in year.glob("*/*.json"))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    times, cpu = [], []
    for _ in range(args.repeat):
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pinset", "history", str(year), "--html", str(work / "h.html"),
                               "--markdown", str(work / "h.md"), "--json", str(work / "h.json")],
                              env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - t)
        now = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(now.ru_utime - used.ru_utime + now.ru_stime - used.ru_stime)
        if done.returncode not in (0, 1):
            print(done.stderr, file=sys.stderr)
            return 1
    size = (work / "h.html").stat().st_size
    print(f"pinset history: {args.nights} nights x {args.pins} pins x {args.builds} builds ({files} files): "
          f"median {statistics.median(times):.2f} s over {args.repeat} runs ({', '.join(f'{t:.2f}' for t in times)}); "
          f"CPU (user+system) median {statistics.median(cpu):.2f} s; page {size / 2**20:.1f} MiB, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
