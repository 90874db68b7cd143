"""pinset forecast vs a plain git loop, on a synthetic upstream with 2,000 open PRs and 40 pins.

The upstream (made with one `git fast-import`): a build of FILES source files; 40 pins, each a one-line change
of its own file; 2,000 PRs from the build, each a one-line change of one file: TOUCHING of them change a pin's
file (a fifth on the pin's own line: they break it; the rest far from it), the others files no pin touches.
The API is tests/testing/fake_github.py on 127.0.0.1 (2,000 PRs: 20 list pages of 100).

The plain loop is what a person writes after filtering by hand: for just the PRs that touch a pin file, a
worktree checkout of the PR merged onto the build and `git am -3` of every pin (abort and go on when one
fails). It does less than forecast: no listing, no filtering, no fork points, no pass on the build itself, no
attribution, retirement or contract check. Warm cache (one forecast before timing), rounds interleaved
(forecast, loop, forecast, loop...), medians and their ratio, and the API requests forecast made.

Usage: python benchmarks/forecast_speed.py [--repeat N] [--prs 2000] [--pins 40] [--touching 50] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

from plain_git import GIT_ENV, load_line  # noqa: E402

from tests.testing.fake_github import TOKEN, FakeGitHub  # noqa: E402

FILES = 400
LINES = 60
PIN_LINE = 20


def text(i: int, changed: dict[int, str] | None = None) -> str:
    lines = [f"int f{i}_{n}(void) {{ return {n}; }}" for n in range(1, LINES + 1)]
    for n, new in (changed or {}).items():
        lines[n - 1] = new
    return "\n".join(lines) + "\n"


def make_upstream(work: Path, prs: int, pins: int, touching: int) -> tuple[Path, list[Path], list[int]]:
    """A bare upstream (tag b1, refs/pull/N/head), the pins' patch folders, the numbers of the touching PRs."""
    up = work / "upstream.git"
    subprocess.run(["git", "init", "-q", "--bare", str(up)], check=True, env=dict(os.environ, **GIT_ENV))
    out = []

    def blob(data: str) -> None:
        raw = data.encode()
        out.append(f"data {len(raw)}\n".encode() + raw + b"\n")

    out.append(b"commit refs/heads/master\nmark :1\ncommitter b <b@b> 1700000000 +0000\n")
    blob("build b1")
    for i in range(FILES):
        out.append(f"M 100644 inline src/f{i}.c\n".encode())
        blob(text(i))
    out.append(b"\n")
    touch = sorted(range(1, prs + 1), key=lambda n: (n * 7919) % prs)[:touching]
    for n in range(1, prs + 1):
        if n in touch:
            k = touch.index(n)
            i, where = k % pins, (PIN_LINE if k % 5 == 0 else LINES - 2)   # every fifth on the pin's line
        else:
            i, where = pins + n % (FILES - pins), 30
        out.append(f"commit refs/pull/{n}/head\ncommitter b <b@b> {1700000000 + n} +0000\n".encode())
        blob(f"PR {n}")
        out.append(b"from :1\n")
        out.append(f"M 100644 inline src/f{i}.c\n".encode())
        blob(text(i, {where: f"int f{i}_{where}(void) {{ return PR{n}; }}"}))
        out.append(b"\n")
    out.append(b"reset refs/tags/b1\nfrom :1\n\n")
    subprocess.run(["git", "--git-dir", str(up), "fast-import", "--quiet"], input=b"".join(out), check=True)
    patches = work / "patches"
    pin_dirs = []
    for i in range(pins):
        folder = patches / f"pin-{i:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        new = text(i, {PIN_LINE: f"int f{i}_{PIN_LINE}(void) {{ return PIN{i}; }}"})
        old_lines, new_lines = text(i).splitlines(), new.splitlines()
        hunk = [f"@@ -{PIN_LINE - 3},7 +{PIN_LINE - 3},7 @@"]
        hunk += [" " + old_lines[n] for n in range(PIN_LINE - 4, PIN_LINE - 1)]
        hunk += ["-" + old_lines[PIN_LINE - 1], "+" + new_lines[PIN_LINE - 1]]
        hunk += [" " + old_lines[n] for n in range(PIN_LINE, PIN_LINE + 3)]
        (folder / "0001-pin.patch").write_text(
            f"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nFrom: b <b@b>\n"
            f"Subject: [PATCH] pin {i}\n\n---\ndiff --git a/src/f{i}.c b/src/f{i}.c\n--- a/src/f{i}.c\n"
            f"+++ b/src/f{i}.c\n" + "\n".join(hunk) + "\n--\n2.39.5\n")
        pin_dirs.append(folder)
    return up, pin_dirs, touch


def run_forecast(cfg: Path, cache: Path, api: str) -> tuple[float, dict]:
    env = dict(os.environ, PINSET_CACHE=str(cache), PYTHONPATH=str(REPO), GITHUB_TOKEN=TOKEN, NO_PROXY="127.0.0.1")
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "f.json"
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pinset", "forecast", "-c", str(cfg), "--repo", "o/r",
                               "--api-url", api, "--json", str(out)], env=env, capture_output=True, text=True, cwd=REPO)
        elapsed = time.perf_counter() - started
        if proc.returncode not in (0, 1) or not out.exists():
            sys.exit(f"pinset forecast failed ({proc.returncode}): {proc.stderr[-2000:]}")
        return elapsed, json.loads(out.read_text())


def plain_loop(up: Path, touch: list[int], pin_dirs: list[Path]) -> float:
    """Per PR that touches a pin file: a worktree of the build with the PR merged, `git am -3` of every pin."""
    env = dict(os.environ, **GIT_ENV)
    started = time.perf_counter()
    for n in touch:
        with tempfile.TemporaryDirectory() as wt:
            subprocess.run(["git", "--git-dir", str(up), "worktree", "add", "-q", "--detach", wt, "b1"], check=True, env=env)
            subprocess.run(["git", "merge", "-q", "--no-edit", f"refs/pull/{n}/head"], cwd=wt, env=env,
                           check=True, capture_output=True)
            for pin in pin_dirs:
                patches = sorted(str(p) for p in pin.glob("*.patch"))
                if subprocess.run(["git", "am", "-q", "-3", *patches], cwd=wt, env=env, capture_output=True).returncode:
                    subprocess.run(["git", "am", "--abort"], cwd=wt, env=env, capture_output=True)
        subprocess.run(["git", "--git-dir", str(up), "worktree", "prune"], env=env, check=True)
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--prs", type=int, default=2000)
    ap.add_argument("--pins", type=int, default=40)
    ap.add_argument("--touching", type=int, default=50)
    ap.add_argument("--work", type=Path)
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="forecast-speed-"))
    up, pin_dirs, touch = make_upstream(work, a.prs, a.pins, a.touching)
    cfg = work / "pins.yaml"
    cfg.write_text(f"upstream: {up}\nbuilds: [b1]\npins:\n"
                   + "".join(f"  - id: {p.name}\n    patches: {p}\n" for p in pin_dirs))
    fake = FakeGitHub()
    fake.pulls = [{"number": n, "title": f"PR {n}", "html_url": f"https://github.test/o/r/pull/{n}", "draft": False,
                   "updated_at": f"2026-01-01T00:00:{n % 60:02d}Z", "head": {"sha": "0" * 40}} for n in range(1, a.prs + 1)]
    fake.thread.start()
    cache = work / "cache"
    try:
        _, data = run_forecast(cfg, cache, fake.url)   # warm-up: mirror, PR heads, prepared pins
        fake.requests.clear()
        times, loops = [], []
        for _ in range(a.repeat):
            elapsed, data = run_forecast(cfg, cache, fake.url)
            times.append(elapsed)
            loops.append(plain_loop(up, touch, pin_dirs))
        requests = len(fake.requests) // a.repeat
    finally:
        fake.server.shutdown()
    judged = [pr for pr in data["prs"] if pr["touches"]]
    breaks = sum(1 for pr in judged for p in pr["pins"] if p["effect"] == "breaks")
    f, loop = statistics.median(times), statistics.median(loops)
    print(f"== forecast: {a.prs} open PRs x {a.pins} pins, {len(judged)} PRs touch a pin file "
          f"({breaks} break a pin), warm, {a.repeat} interleaved rounds")
    print(f"pinset forecast (list + fetch + filter + merge-tree + sim on build and each build+PR): "
          f"median {f:6.2f} s  {sorted(round(x, 2) for x in times)}")
    print(f"plain loop over the {len(touch)} touching PRs (worktree + merge + git am -3 of every pin): "
          f"median {loop:6.2f} s  {sorted(round(x, 2) for x in loops)}")
    print(f"ratio: forecast is {loop / f:.2f}x the plain loop's speed")
    pages = -(-a.prs // 100)
    print(f"API requests per forecast: {requests} ({pages} list pages of 100 + {requests - pages} review lists, "
          f"one per PR that touches a pin and merges; none per other PR)")
    print(load_line())


if __name__ == "__main__":
    main()
