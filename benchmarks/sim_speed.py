"""pinset sim vs a plain `worktree checkout + git am -3` loop, on real llama.cpp snapshots.

Two cases, both on llama.cpp trees vendored in the llama-cpp-python sdists (PyPI):
- real-code pins: 13 pins (the repo's cuda-mmq-iq1m series and 12 backports of upstream's own changes
  of single files, 0.3.35 -> 0.3.36) on 3 snapshots (0.3.34, 0.3.35, 0.3.36);
- a queue like Ollama's llama/patches: one series of 36 patches, each a local edit of a different real
  source file, made on 0.3.34 and carried onto 4 snapshots (0.3.33 .. 0.3.36; upstream rewrote some of
  those files meanwhile, so later snapshots need 3-way merges or conflict). Ollama's own patches cannot be
  fetched here (no GitHub): the queue is built from the sdists, and the output says so.

Per case, in the same run, warm cache, pairs interleaved (pinset, plain loop, pinset...): the median
times and their ratio. Warm, every build's answer is known (the whole-build memo, sim/memo.py); the line
"builds not known" times pinset with that memo emptied before each run (the apply memo, moved-code
indexes and mirror still warm): what a run costs whose builds are new. pinset does strictly more than the loop: besides the applies it attributes
conflicts, checks retirement (also in moved code) and each pin's contract. Then cold: pinset on an empty
cache given the downloaded sdists (it imports them) against the plain loop's own cold start from the
same sdists (fresh repository, tar -xzf + git add -A + commit each; benchmarks/plain_git.py), interleaved.

Usage: python benchmarks/sim_speed.py [--repeat N] [--work DIR] [--case real|queue|both] [--no-cold] [--cold-repeat N]
       [--also OTHER_PINSET_TREE]   (times another pinset tree in the same interleaved pairs: before/after)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))  # pinset and the tests' shared helpers (tests.testing), as the tests import them

from plain_git import (  # noqa: E402
    GIT_ENV,
    checkout_failures,
    checkout_loop,
    cold_plain_loop,
    git,
    load_line,
    loop_command,
    make_clone,
    pin_patches,
    pinset_sim,
    plain_loop,
    processes,
    write_pins,
)

from pinset.sim.changes import is_substantive  # noqa: E402
from pinset.store import Store  # noqa: E402
from tests.testing.snapshots import SNAPSHOTS, build_name, import_snapshots, make_backport_pins, sdist_cache  # noqa: E402

QUEUE_VERSIONS = ["0.3.33", "0.3.34", "0.3.35", "0.3.36"]
QUEUE_BASE = "0.3.34"
MANY_BASE = "0.3.32"   # the many-pin queue is written on an older snapshot than any build it goes onto
SOURCES = (".c", ".cpp", ".h", ".cu", ".cuh")


def _first_changes(repo: Path, base: str, later: list[str]) -> tuple[dict[str, str], dict[str, int | None], list[dict[str, str]]]:
    """Source files of `base` (path -> blob), the index in `later` of the first tree that changed each
    (None: unchanged in all), and each later tree's blobs."""
    def blobs(rev: str) -> dict[str, str]:
        out = git(repo, "ls-tree", "-r", rev, "--", "src/", "ggml/src/", "common/", "tools/")
        return {line.split("\t", 1)[1]: line.split()[2] for line in out.splitlines()
                if line.split("\t", 1)[1].endswith(SOURCES)}
    at_base, trees = blobs(base), [blobs(rev) for rev in later]
    first = {path: next((i for i, tree in enumerate(trees) if tree.get(path) != blob), None)
             for path, blob in at_base.items()}
    return at_base, first, trees


def make_many_pins(store: Store, base_oid: str, later: list[str], dest: Path) -> list[Path]:
    """A downstream queue of 36 one-patch pins, each a `git format-patch` of its own commit on the
    `base_oid` tree (real llama.cpp files, edits made here), in a folder that `each: true` makes one pin per
    patch of. Kinds, by which later tree (`later`, oldest first) first changed the file:
    - 16 edit a line upstream later rewrote (9 rewritten by the first tree, 3 by the second, 2 each by the
      third and fourth): a conflict with upstream from that tree on;
    - 3 pairs edit the same line of a file upstream left alone: the second of each conflicts with the first;
    - 4 backport upstream's own change of a file (2 of the first tree's, 2 of the third's): already upstream
      from there on (retired), applied before;
    - 10 add lines to files upstream left alone: applied everywhere.
    So on the 4 trees 12, 15, 17, 19 of 36 conflict and 2, 2, 4, 4 are upstream."""
    patches = sorted(dest.glob("*.patch"))
    if len(patches) == 36:
        return patches
    shutil.rmtree(dest, ignore_errors=True)
    repo = dest.parent / "many.git"
    shutil.rmtree(repo, ignore_errors=True)
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True, capture_output=True)
    git(repo, "fetch", "-q", str(store.mirror), f"{base_oid}:refs/heads/base",
        *(f"{oid}:refs/heads/later{i}" for i, oid in enumerate(later)))
    at_base, first, trees = _first_changes(repo, "base", [f"later{i}" for i in range(len(later))])
    text = lambda rev, path: git(repo, "show", f"{rev}:{path}")  # noqa: E731

    def rewritten_line(path: str, at: int) -> int | None:
        """A substantive line of the base file, there once, that the tree `at` rewrote and no later tree has."""
        lines = text("base", path).splitlines()
        after = [set(line.strip() for line in text(f"later{i}", path).splitlines()) if path in trees[i] else set()
                 for i in range(at, len(later))]
        for n, line in enumerate(lines):
            if (is_substantive(line) and line.rstrip().endswith(";") and lines.count(line) == 1
                    and all(line.strip() not in tree for tree in after)):
                return n
        return None

    edits: list[tuple[str, str, str]] = []   # (kind, path, new text)
    def edit_line(path: str, n: int, tag: str) -> str:
        lines = text("base", path).splitlines(True)
        indent = lines[n][:len(lines[n]) - len(lines[n].lstrip())]
        lines[n] = lines[n].rstrip("\n") + f" // {tag}\n"
        lines.insert(n + 1, f"{indent}downstream_hook_{tag.replace('-', '_')}(); // the runner needs it\n")
        return "".join(lines)

    used: set[str] = set()
    for at, want in ((0, 9), (1, 3), (2, 2), (3, 2)):
        for path in sorted(p for p, f in first.items() if f == at):
            if want == 0:
                break
            n = rewritten_line(path, at)
            if n is not None:
                edits.append(("upstream", path, edit_line(path, n, f"local-{len(edits) + 1}")))
                used.add(path)
                want -= 1
    untouched = [p for p, f in sorted(first.items()) if f is None and p.endswith((".c", ".cpp"))]
    for path in untouched[::max(1, len(untouched) // 16)]:
        lines = text("base", path).splitlines()
        n = next((i for i in range(len(lines) // 2, len(lines))
                  if is_substantive(lines[i]) and lines[i].rstrip().endswith(";") and lines.count(lines[i]) == 1), None)
        if n is None or len([e for e in edits if e[0] in ("first", "second", "add")]) >= 16:
            continue
        pairs = len([e for e in edits if e[0] == "first"])
        if pairs < 3:
            edits.append(("first", path, edit_line(path, n, f"local-{len(edits) + 1}")))
            edits.append(("second", path, edit_line(path, n, f"other-{len(edits) + 1}")))
        else:
            edits.append(("add", path, edit_line(path, n, f"local-{len(edits) + 1}")))
        used.add(path)
    for at, want in ((0, 2), (2, 2)):
        for path in sorted(p for p, f in first.items() if f == at and p not in used):
            if want and all(trees[i].get(path) == trees[at][path] for i in range(at, len(later))):
                new = text(f"later{at}", path)
                if 4 <= sum(1 for line in new.splitlines() if line not in text("base", path).splitlines()) <= 40:
                    edits.append(("backport", path, new))
                    used.add(path)
                    want -= 1
    index = dest.parent / "many-index"
    env = dict(os.environ, **GIT_ENV, GIT_INDEX_FILE=str(index))
    run = lambda *a: subprocess.run(["git", "--git-dir", str(repo), *a], env=env,  # noqa: E731
                                    capture_output=True, check=True).stdout.decode()
    dest.mkdir(parents=True)
    # a queue's order is its maintainers' history, not the kinds: mixed by a fixed digest, each pair in order
    order = sorted(range(len(edits)), key=lambda i: (hashlib.sha256(edits[i - (edits[i][0] == "second")][1].encode())
                                                     .hexdigest(), edits[i][0] == "second"))
    for number, i in enumerate(order, 1):
        kind, path, new = edits[i]
        index.unlink(missing_ok=True)
        run("read-tree", "base")
        blob = git(repo, "hash-object", "-w", "--stdin", input=new.encode()).strip()
        run("update-index", "--cacheinfo", f"100644,{blob},{path}")
        commit = git(repo, "commit-tree", run("write-tree").strip(), "-p", "base",
                     "-m", f"{kind}: {Path(path).name}").strip()
        git(repo, "format-patch", "-q", "-1", f"--start-number={number}", "-o", str(dest), commit)
    return sorted(dest.glob("*.patch"))


def make_queue(store: Store, base_oid: str, dest: Path, count: int = 36) -> Path:
    """A series of `count` patches on the `base_oid` tree, each a local edit of another real source file
    (a line added after a real line), as `git format-patch` writes a queue."""
    if dest.is_dir() and len(list(dest.glob("*.patch"))) == count:
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    repo = dest.parent / "queue.git"
    shutil.rmtree(repo, ignore_errors=True)
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True, capture_output=True)
    git(repo, "fetch", "-q", str(store.mirror), f"{base_oid}:refs/heads/base")
    listing = git(repo, "ls-tree", "-r", "--name-only", "base", "--", "src/", "ggml/src/", "common/", "tools/")
    files = sorted(p for p in listing.splitlines() if p.endswith((".c", ".cpp", ".h", ".cu", ".cuh")))
    picked = files[:: max(1, len(files) // count)][:count]
    index = dest.parent / "queue-index"
    index.unlink(missing_ok=True)
    env = dict(os.environ, **GIT_ENV, GIT_INDEX_FILE=str(index))
    run = lambda *a, input=None: subprocess.run(["git", "--git-dir", str(repo), *a], input=input, env=env,  # noqa: E731
                                                capture_output=True, check=True).stdout.decode()
    run("read-tree", "base")
    parent = git(repo, "rev-parse", "base").strip()
    for n, path in enumerate(picked):
        lines = git(repo, "show", f"base:{path}").splitlines(True)
        at = next((i for i in range(len(lines) // 2, len(lines)) if is_substantive(lines[i]) and lines[i].rstrip().endswith(";")),
                  len(lines) - 1)
        lines.insert(at + 1, f"    // local patch {n + 1}: keep {Path(path).stem} in step with the runner\n"
                             f"    static const int local_patch_{n + 1}_enabled = {n + 1};\n")
        blob = git(repo, "hash-object", "-w", "--stdin", input="".join(lines).encode()).strip()
        run("update-index", "--cacheinfo", f"100644,{blob},{path}")
        tree = run("write-tree").strip()
        parent = git(repo, "commit-tree", tree, "-p", parent, "-m", f"local patch {n + 1}: {path}").strip()
    dest.mkdir(parents=True)
    git(repo, "format-patch", "-q", "--full-index", "-o", str(dest), f"base..{parent}")
    return dest


def interleaved(repeat: int, *sides) -> list[list[float]]:
    """`repeat` rounds of each side (pinset, the plain loops, another pinset tree) one after the other, in
    the same run: each side's times (other jobs on the machine then stretch every side alike)."""
    times: list[list[float]] = [[] for _ in sides]
    for _ in range(repeat):
        for side, into in zip(sides, times):
            into.append(side())
    return times


def _line(label: str, times: list[float]) -> str:
    return f"{label:<62} median {statistics.median(times):6.2f} s  {sorted(round(x, 2) for x in times)}"


def compare(title: str, cfg: Path, store: Store, names: list[str], oids: list[str], pins: list[Path],
            repeat: int, clone: Path, other: Path | None = None) -> float:
    """Warm: pinset, the worktree loop and the checkout loop in interleaved rounds; then each side's
    programs counted once (strace, not timed). The checkout loop's median (the cheaper plain loop)."""
    pinset_sim(cfg, store.root, names)  # warm-up: PR/patch caches, stored indexes, page cache
    if other is not None:
        pinset_sim(cfg, store.root, names, other)
    def unknown_builds() -> float:
        """pinset sim with the whole-build memo emptied first: every build worked out again (the apply memo,
        the moved-code indexes and the mirror stay warm), what a run costs whose builds are not known yet."""
        shutil.rmtree(store.root / "memo" / "build", ignore_errors=True)
        return pinset_sim(cfg, store.root, names)

    sides = [lambda: pinset_sim(cfg, store.root, names), lambda: plain_loop(store.mirror, oids, pins),
             lambda: checkout_loop(clone, oids, pins), unknown_builds]
    if other is not None:
        sides.append(lambda: pinset_sim(cfg, store.root, names, other))
    sims, loops, checkouts, unknown, *others = interleaved(repeat, *sides)
    pinset_sim(cfg, store.root, names)  # the builds known again, for the process count below
    s, l, c = (statistics.median(x) for x in (sims, loops, checkouts))
    patches = sum(len(pin_patches(p)) for p in pins)
    failed = checkout_failures(clone, oids, pins)
    print(f"== {title}: {len(pins)} pins ({patches} patches) x {len(names)} builds, warm, {repeat} interleaved rounds")
    print(f"   (git am -3 fails on {', '.join(map(str, failed))} pins of {len(pins)} per build in the plain loops)")
    print(_line("pinset sim (applies + attribution + retirement + contracts):", sims))
    print(_line("plain loop, worktree per build (worktree add + git am -3):", loops))
    print(_line("plain loop, one clone (checkout -f + git am -3 / --abort):", checkouts))
    print(_line("pinset sim, builds not known (memo/build emptied first):", unknown)
          + f"  -> checkout loop/that: {c / statistics.median(unknown):.2f}x")
    if other is not None:
        o = statistics.median(others[0])
        print(_line(f"pinset sim of {other} (same cache):", others[0])
              + f"  -> checkout loop/that: {c / o:.2f}x")
    print(f"ratio worktree loop/pinset: {l / s:.2f}x   checkout loop/pinset: {c / s:.2f}x")
    counted = [("pinset sim", processes(lambda prefix: pinset_sim(cfg, store.root, names, prefix=prefix))),
               ("worktree loop", processes(lambda prefix: loop_command(prefix, "worktree", store.mirror, oids, pins))),
               ("checkout loop", processes(lambda prefix: loop_command(prefix, "checkout", clone, oids, pins)))]
    print("programs started (strace -f, one run each, warm): "
          + "; ".join(f"{name} {total} ({gits} git)" for name, (total, gits) in counted))
    return c


def cold(cfg: Path, work: Path, names: list[str], versions: list[str], pins: list[Path], repeat: int,
         warm_loop: float, other: Path | None = None) -> None:
    """pinset sim on an empty cache that has only the downloaded sdists (it imports the trees), against the
    plain loop's own cold start from the same sdists (cold_plain_loop: a fresh clone, then the checkout
    loop), interleaved pairs."""
    sdists = [sdist_cache() / f"llama_cpp_python-{version}.tar.gz" for version in versions]
    def cold_sim(src: Path) -> float:
        cache = work / "cold-cache"
        shutil.rmtree(cache, ignore_errors=True)
        (cache / "downloads").mkdir(parents=True)
        for sdist in sdists:
            shutil.copy(sdist, cache / "downloads")
        elapsed = pinset_sim(cfg, cache, names, src)
        shutil.rmtree(cache)
        return elapsed

    sides = [lambda: cold_sim(REPO), lambda: cold_plain_loop(sdists, pins, work)]
    if other is not None:
        sides.append(lambda: cold_sim(other))
    sims, loops, *others = interleaved(repeat, *sides)
    s, loop = statistics.median(sims), statistics.median(loops)
    print(f"-- cold, {repeat} interleaved pairs (empty cache / fresh repository, sdists downloaded; {len(names)} trees imported)")
    print(_line("cold pinset sim (imports the trees, then sim):", sims))
    print(_line("cold plain loop (tar -xzf + git add -A + commit, checkout loop):", loops))
    if other is not None:
        o = statistics.median(others[0])
        print(_line(f"cold pinset sim of {other}:", others[0]) + f"  -> ratio cold plain/that: {loop / o:.2f}x")
    print(f"ratio cold plain / cold pinset: {loop / s:.2f}x   (warm checkout loop / cold pinset: {warm_loop / s:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", help="work folder, kept and reused (default: a new temp folder, removed)")
    parser.add_argument("--case", choices=["real", "queue", "many", "both", "all"], default="all",
                        help="both: real and queue (as before); all: the three")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold runs")
    parser.add_argument("--cold-repeat", type=int, default=1, help="interleaved cold pairs per case (default 1)")
    parser.add_argument("--also", type=Path, help="another pinset source tree (e.g. an older commit) timed in the same pairs")
    args = parser.parse_args()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="pinset-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"{load_line()} at the start (other jobs on the machine stretch both sides alike: compare the ratios)")
    store = Store.open(work / "cache")
    versions = sorted(set(SNAPSHOTS) | set(QUEUE_VERSIONS) | {MANY_BASE})
    builds = import_snapshots(store, versions)
    clone = make_clone(store.mirror, work / "clone")
    cases = {"real", "queue", "many"} if args.case == "all" else {"real", "queue"} if args.case == "both" else {args.case}
    try:
        if "real" in cases:
            series = REPO / "patches" / "cuda-mmq-iq1m"
            ours = [series] if series.is_dir() else []
            (work / "pins").mkdir(exist_ok=True)
            pins = ours + make_backport_pins(store, builds["0.3.35"], builds["0.3.36"], work / "pins",
                                             count=13 - len(ours))
            names = [build_name(v) for v in SNAPSHOTS]
            cfg = write_pins(work / "pins.yaml", names, pins)
            loop = compare("real-code pins x real snapshots", cfg, store, names, [builds[v].oid for v in SNAPSHOTS],
                           pins, args.repeat, clone, args.also)
            if not args.no_cold:
                cold(cfg, work, names, list(SNAPSHOTS), pins, args.cold_repeat, loop, args.also)
        if "queue" in cases:
            queue = make_queue(store, builds[QUEUE_BASE].oid, work / "queue" / "patches")
            names = [build_name(v) for v in QUEUE_VERSIONS]
            cfg = work / "queue.yaml"
            cfg.write_text("builds: [" + ", ".join(names) + f"]\npins:\n  - id: local-queue\n    patches: {queue}\n")
            print("(the queue: 36 SYNTHETIC local patches of real files made on 0.3.34, like Ollama's llama/patches,"
                  " whose real queue cannot be fetched here)")
            loop = compare("patch queue x real snapshots", cfg, store, names,
                           [builds[v].oid for v in QUEUE_VERSIONS], [queue], args.repeat, clone, args.also)
            if not args.no_cold:
                cold(cfg, work, names, QUEUE_VERSIONS, [queue], args.cold_repeat, loop, args.also)
        if "many" in cases:
            oids = [builds[v].oid for v in QUEUE_VERSIONS]
            patches = make_many_pins(store, builds[MANY_BASE].oid, oids, work / "many" / "patches")
            names = [build_name(v) for v in QUEUE_VERSIONS]
            cfg = work / "many.yaml"
            cfg.write_text("builds: [" + ", ".join(names) + f"]\npins:\n  - id: q\n    patches: {patches[0].parent}\n"
                           "    each: true\n")
            print(f"(the many-pin queue: {len(patches)} one-patch pins (`each: true`), edits made here of real files of "
                  f"{MANY_BASE}, carried onto {QUEUE_VERSIONS[0]}..{QUEUE_VERSIONS[-1]})")
            loop = compare("many-pin queue x real snapshots", cfg, store, names, oids, patches, args.repeat, clone,
                           args.also)
            if not args.no_cold:
                cold(cfg, work, names, QUEUE_VERSIONS, patches, args.cold_repeat, loop, args.also)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
