"""What sim_speed.py and sim_scaling.py share: the plain git loop pinset is compared with, cold and warm,
a timed `pinset sim`, and the pins.yaml both write.

The plain loop is what a person does without pinset, in two shapes: per build a worktree checkout, then
`git am -3` of each pin (abort and go on when one fails); or the cheaper one a maintainer writes once: one
clone, per build `git checkout -f BUILD`, then the same `git am -3` / `git am --abort` of each pin. Cold, it
first makes its repository the way a person would from the downloaded sdists: a fresh repository; per sdist
`tar -xzf` of vendor/llama.cpp, `git add -A` and a commit.

A pin is a folder of patches (one `git am` of them all) or one `.patch` file (a pin of one patch, as
`each: true` makes of a folder).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GIT_ENV = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def git(repo: Path, *args: str, input: bytes | None = None) -> str:
    return subprocess.run(["git", "--git-dir", str(repo), *args], input=input, capture_output=True, check=True,
                          env=dict(os.environ, **GIT_ENV)).stdout.decode()


def pinset_sim(cfg: Path, cache: Path, builds: list[str] | None = None, src: Path = REPO,
               prefix: list[str] | None = None) -> float:
    """Seconds of one `pinset sim` (of `src`'s pinset) on `cfg` with the cache `cache`; exits on a crash.
    `prefix`: a command line it runs behind (strace, for processes())."""
    env = dict(os.environ, PINSET_CACHE=str(cache), PYTHONPATH=str(src))
    # as installed (pip compiles the modules): a shell with PYTHONDONTWRITEBYTECODE would make every run
    # compile all of pinset again (0.4 s of each warm run on the VM)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "sim.json"
        argv = [*(prefix or []), sys.executable, "-m", "pinset", "sim", "-c", str(cfg), "--json", str(out)]
        if builds:
            argv += ["--builds", ",".join(builds)]
        started = time.perf_counter()
        # cwd=src: `python -m` puts the current folder before PYTHONPATH, so run from another checkout
        # the "other" tree would be this one
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=src)
        elapsed = time.perf_counter() - started
        # exit 1 is a verdict (a required pin failed) only with a result written; else the run broke
        if proc.returncode not in (0, 1) or not out.is_file() or not out.stat().st_size:
            sys.exit(f"pinset sim of {src} failed (exit {proc.returncode}, no result): "
                     f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return elapsed


def write_pins(path: Path, builds: list[str], pins: list[Path], upstream: Path | None = None) -> Path:
    """A pins.yaml with `builds` and one pin per folder of `pins` (named after the folder)."""
    path.write_text((f"upstream: {upstream}\n" if upstream else "") + "builds: [" + ", ".join(builds) + "]\npins:\n"
                    + "".join(f"  - id: {p.name}\n    patches: {p}\n" for p in pins))
    return path


def pin_patches(pin: Path) -> list[str]:
    """The patch files of a pin: a folder's `*.patch` in name order, or the one `.patch` file."""
    return [str(pin)] if pin.is_file() else sorted(str(p) for p in pin.glob("*.patch"))


def _am_each(tree: str, pins: list[Path], env: dict[str, str]) -> int:
    """`git am -3` of each pin in `tree`, `git am --abort` and on when one fails; how many failed."""
    failed = 0
    for pin in pins:
        if subprocess.run(["git", "am", "-q", "-3", *pin_patches(pin)], cwd=tree, env=env,
                          capture_output=True).returncode != 0:
            failed += 1
            subprocess.run(["git", "am", "--abort"], cwd=tree, env=env, capture_output=True)
    return failed


def plain_loop(mirror: Path, oids: list[str], pin_dirs: list[Path]) -> float:
    """Per build: check out a worktree, `git am -3` every pin (abort and go on when one fails)."""
    env = dict(os.environ, **GIT_ENV)
    started = time.perf_counter()
    for oid in oids:
        with tempfile.TemporaryDirectory() as wt:
            subprocess.run(["git", "--git-dir", str(mirror), "worktree", "add", "-q", "--detach", wt, oid],
                           check=True, env=env)
            _am_each(wt, pin_dirs, env)
        subprocess.run(["git", "--git-dir", str(mirror), "worktree", "prune"], check=True, env=env)
    return time.perf_counter() - started


def make_clone(source: Path, dest: Path) -> Path:
    """The maintainer's one clone of `source` (a local clone: objects hard-linked), made once, not timed."""
    if not (dest / ".git").is_dir():
        shutil.rmtree(dest, ignore_errors=True)
        subprocess.run(["git", "clone", "-q", "--no-checkout", str(source), str(dest)], check=True,
                       env=dict(os.environ, **GIT_ENV), capture_output=True)
    return dest


def checkout_loop(clone: Path, oids: list[str], pins: list[Path]) -> float:
    """The cheaper loop: in one clone, per build `git checkout -f BUILD`, then `git am -3` of each pin
    (`git am --abort` and on when one fails)."""
    env = dict(os.environ, **GIT_ENV)
    started = time.perf_counter()
    for oid in oids:
        subprocess.run(["git", "checkout", "-q", "-f", "--detach", oid], cwd=clone, check=True, env=env)
        _am_each(str(clone), pins, env)
    return time.perf_counter() - started


def checkout_failures(clone: Path, oids: list[str], pins: list[Path]) -> list[int]:
    """Per build, how many pins `git am -3` fails on in the checkout loop (the case's shape, printed)."""
    env = dict(os.environ, **GIT_ENV)
    counts = []
    for oid in oids:
        subprocess.run(["git", "checkout", "-q", "-f", "--detach", oid], cwd=clone, check=True, env=env)
        counts.append(_am_each(str(clone), pins, env))
    return counts


def processes(call) -> tuple[int, int]:
    """(programs started, of which git) while `call()` runs, counted by strace -f (not timed: strace slows
    every exec); (-1, -1) without strace. `call(prefix)` runs its command line behind `prefix`."""
    if shutil.which("strace") is None:
        return -1, -1
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / "trace"
        call(["strace", "-f", "-qq", "-e", "trace=execve", "-e", "signal=none", "-o", str(trace)])
        started = [line for line in trace.read_text(errors="replace").splitlines()
                   if "execve(" in line and line.rstrip().endswith("= 0")]
    gits = [line for line in started if '", ["git"' in line or '/git", [' in line]
    return len(started), len(gits)


def cold_plain_loop(sdists: list[Path], pin_dirs: list[Path], work: Path) -> float:
    """The plain loop from nothing but the sdists: a fresh repository, per sdist `tar -xzf` of
    vendor/llama.cpp + `git add -A` + a commit, then checkout_loop over those commits (the cheaper loop).
    Seconds, all of it."""
    env = dict(os.environ, **GIT_ENV)
    clone = work / "cold-plain"
    shutil.rmtree(clone, ignore_errors=True)
    repo = clone / ".git"
    index = dict(env, GIT_INDEX_FILE=str(work / "cold-plain-index"))
    started = time.perf_counter()
    subprocess.run(["git", "init", "-q", str(clone)], check=True, env=env)
    oids = []
    for sdist in sdists:
        top = sdist.name.removesuffix(".tar.gz")
        with tempfile.TemporaryDirectory(dir=work) as tree:
            subprocess.run(["tar", "-xzf", str(sdist), "-C", tree, "--strip-components=3", f"{top}/vendor/llama.cpp"],
                           check=True, env=env)
            Path(index["GIT_INDEX_FILE"]).unlink(missing_ok=True)
            subprocess.run(["git", "--git-dir", str(repo), "--work-tree", tree, "add", "-A", "-f", "."],
                           cwd=tree, check=True, env=index)
            tree_id = subprocess.run(["git", "--git-dir", str(repo), "write-tree"], check=True, env=index,
                                     capture_output=True, text=True).stdout.strip()
            oids.append(git(repo, "commit-tree", tree_id, "-m", sdist.name).strip())
    checkout_loop(clone, oids, pin_dirs)
    elapsed = time.perf_counter() - started
    # untimed: `git am` may have left a detached `gc --auto` removing loose objects in the clone meanwhile
    # (a file gone under rmtree's feet ended r7b's run): let it finish, then remove what is left
    subprocess.run(["git", "-C", str(clone), "gc", "--auto", "--quiet"], env=env, capture_output=True)
    for _ in range(20):
        shutil.rmtree(clone, ignore_errors=True)
        if not clone.exists():
            break
        time.sleep(0.5)
    Path(index["GIT_INDEX_FILE"]).unlink(missing_ok=True)
    return elapsed


def load_line() -> str:
    load = os.getloadavg()
    return f"cores: {os.cpu_count()}  load average (1/5/15 min): {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"


def loop_command(prefix: list[str], loop: str, repo: Path, oids: list[str], pins: list[Path]) -> None:
    """Run one plain loop (`worktree` or `checkout`) in a child behind `prefix` (processes() counts it)."""
    subprocess.run([*prefix, sys.executable, __file__, loop, str(repo), ",".join(oids), *map(str, pins)], check=True)


if __name__ == "__main__":  # python plain_git.py worktree|checkout REPO OID,OID... PIN...
    kind, repo_arg, oid_arg, *pin_args = sys.argv[1:]
    (plain_loop if kind == "worktree" else checkout_loop)(Path(repo_arg), oid_arg.split(","), [Path(a) for a in pin_args])
