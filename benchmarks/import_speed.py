"""Importing llama-cpp-python sdists into a fresh mirror: the stream into `git fast-import` (what pinset does)
against the old path (tarfile unpack into the scratch + `git add -A` + commit-tree), alternating rounds,
each into its own new cache; both must give the same commit ids.

Usage: PINSET_SDIST_CACHE=~/.cache/pinset-sdists python benchmarks/import_speed.py [--repeat N] [VERSION ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pinset.store import Store  # noqa: E402
from pinset.upstream import builds, pypi  # noqa: E402
from pinset.upstream.mirror import Mirror  # noqa: E402
from tests.testing.snapshots import sdist_cache  # noqa: E402

PACKAGE = "llama-cpp-python"


def import_all(versions: list[str], streamed: bool) -> tuple[list[float], list[str]]:
    """Seconds per sdist and the commit ids, into one new mirror in a temporary cache."""
    seconds, commits = [], []
    with tempfile.TemporaryDirectory(prefix="pinset-import-bench-") as folder:
        store = Store.open(Path(folder) / "cache")
        with Mirror(store.mirror) as mirror:
            for version in versions:
                sdist = sdist_cache() / f"llama_cpp_python-{version}.tar.gz"
                ref = f"refs/pinset/pypi/{PACKAGE}/{version}"
                started = time.perf_counter()
                if streamed:
                    commit = builds._import_tree(sdist, PACKAGE, version, ref, store, mirror)
                else:
                    with store.scratch("sdist-") as tree:
                        upstream = pypi.extract_vendored_tree(sdist, PACKAGE, version, tree)
                        commit = mirror.import_directory(tree, ref, builds._import_message(PACKAGE, version, upstream))
                seconds.append(time.perf_counter() - started)
                commits.append(commit)
    return seconds, commits


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("versions", nargs="*", default=["0.3.34", "0.3.35", "0.3.36"])
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"cores: {os.cpu_count()}  load average at the start: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; "
          f"sdists {', '.join(args.versions)} into a fresh mirror each round, alternating")
    totals: dict[bool, list[float]] = {True: [], False: []}
    ids: dict[bool, list[str]] = {}
    for _ in range(args.repeat):
        for streamed in (True, False):
            seconds, ids[streamed] = import_all(args.versions, streamed)
            totals[streamed].append(sum(seconds))
            print(f"  {'fast-import stream' if streamed else 'unpack + git add -A':20} "
                  + "  ".join(f"{s:6.2f}" for s in seconds) + f"   total {sum(seconds):6.2f} s", flush=True)
    new, old = statistics.median(totals[True]), statistics.median(totals[False])
    print(f"median total: fast-import stream {new:.2f} s, unpack + git add -A {old:.2f} s -> {old / new:.2f}x")
    print("same commit ids: " + ("yes" if ids[True] == ids[False] else f"NO: {ids[True]} vs {ids[False]}"))
    if ids[True] != ids[False]:
        sys.exit(1)


if __name__ == "__main__":
    main()
