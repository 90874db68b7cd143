"""`pinset blame` over a long range of real llama.cpp code, six pins, timed.

There is no network to GitHub here, so the real upstream commits between two llama-cpp-python
releases cannot be fetched. The range is built from what PyPI gives us, and the output says so:

- a first-parent chain of REAL vendored snapshots (llama-cpp-python 0.3.30 .. 0.3.35, one commit each),
- then a SYNTHETIC history from 0.3.35 (llama.cpp 4df29be4f) to 0.3.36 (0c1e57098): upstream's real
  diff between the two replayed file by file, one commit per changed file (~1,650 commits; every
  40th pair of files arrives through a merged side branch "Merge pull request #N"), ending on
  exactly the real 0.3.36 tree.

Six pins cut from the real 0.3.35 code: four edit a real line that upstream later rewrites (they
conflict from the commit that rewrites their file on), two backport upstream's own change of a file
(they land upstream at that file's commit). The expected first bad commit of each is known by
construction and checked. `pinset blame` runs as a subprocess on a warm cache (the sdists already
imported; the first run also fetches the range into the mirror) and the time is printed.

Each round also times the plain loop blame replaces (per pin, a bisect of the first-parent commits
with a worktree checkout and `git apply --check` per probe) and prints the ratio.

Usage: python benchmarks/blame_speed.py [--repeat N] [--work DIR] [--also OTHER_PINSET_TREE]
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # pinset and the tests' shared helpers (tests.testing), as the tests import them

from pinset.sim.changes import is_substantive  # noqa: E402
from pinset.store import Store  # noqa: E402
from tests.testing.snapshots import SNAPSHOTS, import_snapshots  # noqa: E402

CHAIN = ["0.3.30", "0.3.31", "0.3.32", "0.3.33", "0.3.34", "0.3.35"]
LAST = "0.3.36"
GIT_ENV = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def git(repo: Path, *args: str, input: bytes | None = None) -> str:
    proc = subprocess.run(["git", "--git-dir", str(repo), *args], input=input, capture_output=True,
                          env=dict(os.environ, **GIT_ENV), check=True)
    return proc.stdout.decode()


def build_upstream(store: Store, oids: dict[str, str], dest: Path) -> tuple[Path, dict[str, str], int]:
    """The upstream repository; returns (path, changed path -> sha of the commit that changed it, merges)."""
    git(dest, "init", "-q", "--bare")
    git(dest, "fetch", "-q", str(store.mirror), *[f"{oids[v]}:refs/snap/{v}" for v in [*CHAIN, LAST]])
    parent = None
    for version in CHAIN:  # the real snapshots as a first-parent chain
        tree = git(dest, "rev-parse", f"{oids[version]}^{{tree}}").strip()
        args = ["commit-tree", tree, "-m", f"llama.cpp {SNAPSHOTS.get(version, version)} as vendored in "
                f"llama-cpp-python {version} (real snapshot)"] + (["-p", parent] if parent else [])
        parent = git(dest, *args).strip()
        git(dest, "tag", f"lcp-{version}", parent)
    changes = []
    for line in git(dest, "diff-tree", "-r", "--no-renames", oids[CHAIN[-1]], oids[LAST]).splitlines():
        meta, path = line.split("\t", 1)
        _, new_mode, _, new_sha, status = meta.split()
        changes.append((path, status, new_mode, new_sha))
    random.Random(13).shuffle(changes)  # upstream does not change files in path order
    stream: list[bytes] = []
    mark = 0
    when = 1_760_000_000

    def commit(branch: str, message: str, items, frm: str | None = None, merge: int | None = None) -> int:
        nonlocal mark, when
        mark, when = mark + 1, when + 60
        msg = message.encode()
        out = [f"commit refs/heads/{branch}\nmark :{mark}\ncommitter b <b@b> {when} +0000\n".encode(),
               f"data {len(msg)}\n".encode(), msg, b"\n"]
        if frm:
            out.append(f"from {frm}\n".encode())
        if merge:
            out.append(f"merge :{merge}\n".encode())
        for path, status, mode, sha in items:
            out.append(f"D {path}\n".encode() if status == "D" else f"M {mode} {sha} {path}\n".encode())
        stream.append(b"".join(out) + b"\n")
        return mark

    by_path_mark: dict[str, int] = {}
    tip = None
    merges = i = 0
    while i < len(changes):
        frm = parent if tip is None else None
        if i % 40 == 39 and i + 2 <= len(changes):  # a PR of two files, merged with a merge commit
            pair = changes[i:i + 2]
            side = commit(f"pr-{i}", f"{pair[0][0]}: update", pair[:1], frm=parent if tip is None else f":{tip}")
            side = commit(f"pr-{i}", f"{pair[1][0]}: update", pair[1:], frm=f":{side}")
            tip = commit("master", f"Merge pull request #{20000 + i} from contributor/pr-{i}", pair, frm=frm, merge=side)
            merges += 1
            for c in pair:
                by_path_mark[c[0]] = tip
            i += 2
            continue
        path = changes[i][0]
        tip = commit("master", f"{path}: update to {SNAPSHOTS[LAST]} (#{20000 + i})", changes[i:i + 1], frm=frm)
        by_path_mark[path] = tip
        i += 1
    stream.append(f"reset refs/tags/lcp-{LAST}\nfrom :{tip}\n\n".encode())
    marks = dest / "marks"
    subprocess.run(["git", "--git-dir", str(dest), "fast-import", "--quiet", f"--export-marks={marks}"],
                   input=b"".join(stream), check=True, env=dict(os.environ, **GIT_ENV))
    sha_of = dict(line.split() for line in marks.read_text().splitlines())
    final_tree = git(dest, "rev-parse", f"lcp-{LAST}^{{tree}}").strip()
    assert final_tree == git(dest, "rev-parse", f"{oids[LAST]}^{{tree}}").strip(), "replay must end on 0.3.36's tree"
    return dest, {p: sha_of[f":{m}"] for p, m in by_path_mark.items()}, merges


def _patch(repo: Path, path: str, old: str, new: str, old_sha: str) -> str:
    new_sha = git(repo, "hash-object", "--stdin", input=new.encode()).strip()
    body = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}"))
    return (f"From: bench\nSubject: [PATCH] pin {path}\n\n---\ndiff --git a/{path} b/{path}\n"
            f"index {old_sha}..{new_sha} 100644\n{body}")


def make_pins(repo: Path, good: str, bad: str, dest: Path) -> list[tuple[str, Path, str, str]]:
    """(id, folder, expected status, the path whose commit should be blamed) for six real-code pins."""
    numstat = git(repo, "diff", "--numstat", "--diff-filter=M", good, bad, "--", "ggml/src/ggml-cuda/")
    paths = sorted(p for a, r, p in (line.split("\t") for line in numstat.splitlines())
                   if a != "-" and 4 <= int(a) + int(r) <= 60)
    pins = []
    for n, path in enumerate(paths[:6]):
        old = git(repo, "show", f"{good}:{path}")
        old_sha = git(repo, "rev-parse", f"{good}:{path}").strip()
        new_upstream = git(repo, "show", f"{bad}:{path}")
        folder = dest / f"pin{n}-{Path(path).name.replace('.', '-')}"
        folder.mkdir(parents=True, exist_ok=True)
        if n < 4:  # edit a real line that upstream rewrites later: a conflict from that commit on
            removed = [line for line in difflib.ndiff(old.splitlines(), new_upstream.splitlines())
                       if line.startswith("- ") and is_substantive(line[2:]) and "//" not in line]
            target = removed[0][2:]
            new = old.replace(target + "\n", target + f" // pinned edit {n}\n", 1)
            status = "conflict"
        else:  # backport upstream's own change of the file: lands upstream at that commit
            new, status = new_upstream, "upstream"
        (folder / "0001-pin.patch").write_text(_patch(repo, path, old, new, old_sha))
        pins.append((folder.name, folder, status, path))
    return pins


def plain_bisect(upstream: Path, good: str, bad: str, pins, work: Path) -> tuple[float, dict[str, str]]:
    """The plain loop blame replaces: per pin, bisect the first-parent commits good..bad in one worktree,
    each probe a `git checkout` and a `git apply --check` of the pin (the first commit it stops applying on).
    Returns (seconds, pin id -> first bad commit)."""
    env = dict(os.environ, **GIT_ENV)
    started = time.perf_counter()
    commits = git(upstream, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}").split()
    wt = work / "plain-wt"
    subprocess.run(["git", "--git-dir", str(upstream), "worktree", "add", "-q", "--detach", str(wt), good],
                   check=True, env=env, capture_output=True)
    found = {}
    try:
        for pid, folder, _, _ in pins:
            patches = sorted(str(p) for p in folder.glob("*.patch"))
            lo, hi = 0, len(commits) - 1  # the last commit is bad, good applies
            while lo < hi:
                mid = (lo + hi) // 2
                subprocess.run(["git", "checkout", "-q", "--detach", commits[mid]], cwd=wt, env=env, check=True,
                               capture_output=True)
                applies = subprocess.run(["git", "apply", "--check", *patches], cwd=wt, env=env,
                                         capture_output=True).returncode == 0
                lo, hi = (mid + 1, hi) if applies else (lo, mid)
            found[pid] = commits[lo]
    finally:
        shutil.rmtree(wt, ignore_errors=True)
        subprocess.run(["git", "--git-dir", str(upstream), "worktree", "prune"], env=env, check=True)
    return time.perf_counter() - started, found


def blame(cfg: Path, cache: Path, good: str, bad: str, out: Path, src: Path = REPO) -> tuple[float, float]:
    """(wall seconds, CPU seconds of pinset and its git children): the CPU time says what the run costs
    when other jobs share the cores."""
    env = dict(os.environ, PINSET_CACHE=str(cache), PYTHONPATH=str(src))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pinset", "blame", "-c", str(cfg), "--good", good, "--bad", bad,
                           "--json", str(out)], env=env, capture_output=True, text=True, cwd=src)  # see plain_git.pinset_sim
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        sys.exit(f"pinset blame failed: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", help="work folder (default: a new temp folder)")
    parser.add_argument("--also", type=Path, help="another pinset source tree (e.g. an older commit) timed in the same "
                        "interleaved rounds: before/after")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="pinset-blame-bench-"))
    started = time.perf_counter()
    store = Store.open(work / "cache")
    builds = import_snapshots(store, [*CHAIN, LAST])
    oids = {v: b.oid for v, b in builds.items()}
    upstream = work / "upstream.git"
    if upstream.exists():
        shutil.rmtree(upstream)
    upstream, blamed_commit, merges = build_upstream(store, oids, upstream)
    good, bad = f"lcp-{CHAIN[-1]}", f"lcp-{LAST}"
    pins = make_pins(upstream, good, bad, work / "pins")
    cfg = work / "pins.yaml"
    cfg.write_text(f"upstream: {upstream}\nbuilds: [{good}, {bad}]\npins:\n"
                   + "".join(f"  - id: {pid}\n    patches: {folder}\n" for pid, folder, _, _ in pins))
    count = int(git(upstream, "rev-list", "--count", "--first-parent", f"{good}..{bad}"))
    setup = time.perf_counter() - started

    # A rebuilt upstream has new commits under the same tag names: forget the tags the mirror kept.
    for ref in git(store.mirror, "for-each-ref", "--format=%(refname)", "refs/pinset/upstream/").split():
        git(store.mirror, "update-ref", "-d", ref)
    out = work / "blame.json"
    load = os.getloadavg()[0]
    cold = blame(cfg, store.root, good, bad, out)
    warm, plain, also, unknown = [], [], [], []
    for _ in range(args.repeat):  # interleaved rounds: pinset, the plain bisect loop, the other tree
        warm.append(blame(cfg, store.root, good, bad, out))
        # the probes' whole-build answers forgotten (sim/memo.py): each probe worked out again, the apply memo,
        # moved-code indexes and mirror still warm
        shutil.rmtree(store.root / "memo" / "build", ignore_errors=True)
        unknown.append(blame(cfg, store.root, good, bad, work / "blame-unknown.json"))
        seconds, plain_found = plain_bisect(upstream, good, bad, pins, work)
        plain.append(seconds)
        if args.also:
            also.append(blame(cfg, store.root, good, bad, work / "blame-also.json", args.also))
    doc = json.loads(out.read_text())
    results = {p["id"]: p for p in doc["pins"]}
    print(f"range: {good} ({SNAPSHOTS[CHAIN[-1]]}) .. {bad} ({SNAPSHOTS[LAST]}): {count} first-parent commits "
          f"({merges} merge commits), {doc['probes']} probed")
    print("       REAL end points (llama.cpp trees vendored in the llama-cpp-python sdists); the commits in between")
    print("       are SYNTHETIC: upstream's real diff replayed one changed file per commit (GitHub is not reachable")
    print(f"       here); before them, {len(CHAIN)} real snapshots {CHAIN[0]}..{CHAIN[-1]} as a first-parent chain")
    wrong = 0
    for pid, _, status, path in pins:
        got = results[pid]
        fb = (got.get("first_bad") or {}).get("commit")
        ok = got["status"] == status and fb == blamed_commit[path]
        wrong += not ok
        print(f"  {pid:34} {got['status']:9} steps {got['steps']:2}  first bad {fb[:12] if fb else None} "
              f"{'= expected' if ok else '!= expected ' + blamed_commit[path][:12] + ' ' + status}")
    print(f"probes shared: {doc['probes']} commits simulated for {sum(p['steps'] for p in doc['pins'])} pin steps")
    print(f"pins: {len(pins)}  cores: {os.cpu_count()}  setup (imports, upstream, pins): {setup:.1f} s")
    walls, cpus = [w for w, _ in warm], [c for _, c in warm]
    print(f"load average before the runs: {load:.1f} (other jobs on the machine stretch wall times)")
    print(f"pinset blame, first run (fetches the range into the mirror): {cold[0]:.2f} s wall, {cold[1]:.2f} s CPU")
    print(f"pinset blame, warm: median {statistics.median(walls):.2f} s wall {sorted(round(x, 2) for x in walls)}, "
          f"median {statistics.median(cpus):.2f} s CPU  (goal: <= 10 s)")
    print(f"pinset blame, probes not known (memo/build emptied first): median "
          f"{statistics.median([w for w, _ in unknown]):.2f} s wall {sorted(round(w, 2) for w, _ in unknown)}, "
          f"median {statistics.median([c for _, c in unknown]):.2f} s CPU")
    if json.loads((work / "blame-unknown.json").read_text())["pins"] != json.loads(out.read_text())["pins"]:
        print("NOTE: the blame JSON with the probes worked out again differs in its pins")
    plain_ok = sum(plain_found[pid] == blamed_commit[path] for pid, _, _, path in pins)
    print(f"plain loop (per pin: bisect with worktree checkout + git apply --check; {plain_ok} of {len(pins)} "
          f"found the expected commit): median {statistics.median(plain):.2f} s {sorted(round(x, 2) for x in plain)}")
    print(f"ratio plain/pinset blame: {statistics.median(plain) / statistics.median(walls):.2f}x")
    if also:
        aw = [w for w, _ in also]
        print(f"pinset blame of {args.also} (same rounds): median {statistics.median(aw):.2f} s wall "
              f"{sorted(round(x, 2) for x in aw)}, median {statistics.median([c for _, c in also]):.2f} s CPU"
              f" -> ratio plain/that: {statistics.median(plain) / statistics.median(aw):.2f}x")
        if json.loads((work / "blame-also.json").read_text())["pins"] != doc["pins"]:
            print("NOTE: the other tree's blame JSON differs in its pins")
    if wrong:
        sys.exit(f"{wrong} pin(s) blamed on the wrong commit")


if __name__ == "__main__":
    main()
