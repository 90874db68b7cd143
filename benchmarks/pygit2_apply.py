"""pygit2 in-process apply vs one `git apply --cached` process vs a memo lookup: the many-pin queue on 0.3.36.

Usage: python benchmarks/pygit2_apply.py WORK PYGIT2_DIR
  WORK: a sim_speed.py --work folder after --case many; PYGIT2_DIR: a `pip install --target` folder with
  pygit2 (it is not a dependency of pinset: docs/design.md says why)
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

TREE = "db68f88f0f4a96b7d73019ab8df110984e41ce62"   # the 0.3.36 snapshot's commit in the benchmark's mirror


def main() -> None:
    work, target = Path(sys.argv[1]), sys.argv[2]
    sys.path[:0] = [target, str(Path(__file__).resolve().parent.parent)]
    import pygit2

    from pinset.sim import memo

    mirror = work / "cache" / "mirror.git"
    repo = pygit2.Repository(str(mirror))
    tree = repo.revparse_single(TREE).peel(pygit2.Tree)
    patches = sorted((work / "many" / "patches").glob("*.patch"))
    texts = [p.read_bytes() for p in patches]

    started, in_process = time.perf_counter(), 0
    repo.index.read_tree(tree)
    for text in texts:
        diff = pygit2.Diff.parse_diff(text[text.index(b"diff --git"):].split(b"\n-- \n")[0] + b"\n")
        in_process += repo.applies(diff, location=pygit2.enums.ApplyLocation.INDEX, raise_error=False)
    libgit2 = time.perf_counter() - started

    index = work / "pg-index"
    env = dict(os.environ, GIT_INDEX_FILE=str(index))
    subprocess.run(["git", "--git-dir", str(mirror), "read-tree", TREE], env=env, check=True)
    base = index.read_bytes()
    started, by_git = time.perf_counter(), 0
    for patch in patches:
        index.write_bytes(base)
        by_git += subprocess.run(["git", "--git-dir", str(mirror), "apply", "--cached", str(patch)], env=env,
                                 capture_output=True).returncode == 0
    git = time.perf_counter() - started
    index.unlink()

    kept = memo.ApplyMemo(None)
    started = time.perf_counter()
    for text in texts:
        kept.get(memo.apply_key([text], True, [("x", 0o100644, "0" * 40)], [], "git"))
    lookup = time.perf_counter() - started
    print(f"pygit2 {pygit2.__version__} / libgit2 {pygit2.LIBGIT2_VERSION}, {len(texts)} one-patch pins on 0.3.36 "
          "(whole-tree index):")
    print(f"  pygit2 parse_diff + applies(INDEX) (in process): {libgit2 * 1000:.0f} ms, {in_process} apply (no 3-way)")
    print(f"  git apply --cached, one process each:           {git * 1000:.0f} ms, {by_git} apply")
    print(f"  memo key + lookup (in the run):                 {lookup * 1000:.1f} ms")


if __name__ == "__main__":
    main()
