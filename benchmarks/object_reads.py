"""pinset's object reader against GitPython's `Repo.odb` on the same mirror, and whose git child sees a token.

    python benchmarks/object_reads.py MIRROR.git [REF]     (e.g. a cache's mirror.git after benchmarks/sim_speed.py)

Reads 1,000 blobs of REF's tree (default: the llama-cpp-python 0.3.36 import) in one batch and 300 one
by one, both ways, best of 2; then says which persistent `git cat-file` has GITHUB_TOKEN in its
environment (pinset's children must not). GitPython is not a dependency: pip install gitpython first.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pinset.upstream.mirror import Mirror  # noqa: E402


def main() -> None:
    import git  # GitPython

    mirror_path = Path(sys.argv[1])
    ref = sys.argv[2] if len(sys.argv) > 2 else "refs/pinset/pypi/llama-cpp-python/0.3.36"
    os.environ["GITHUB_TOKEN"] = "ghp_benchmark_token"
    with Mirror(mirror_path) as mirror:
        tree = mirror.tree_of(ref)
        listing = mirror.git_ok("ls-tree", "-r", tree)
        blobs = [line.split()[2] for line in listing.splitlines() if line.split()[1] == "blob"][:1000]
        repo = git.Repo(mirror_path)
        times: dict[str, list[float]] = {}

        def timed(name, fn):
            started = time.perf_counter()
            result = fn()
            times.setdefault(name, []).append(time.perf_counter() - started)
            return result

        for _ in range(2):
            ours = timed(f"pinset ObjectReader, {len(blobs)} blobs in one batch", lambda: mirror.read_objects(blobs))
            timed("pinset ObjectReader, 300 single reads", lambda: [mirror.read_objects([b]) for b in blobs[:300]])
            theirs = timed(f"GitPython Repo.odb.stream, {len(blobs)} blobs",
                           lambda: {b: repo.odb.stream(bytes.fromhex(b)).read() for b in blobs})
            timed("GitPython Repo.odb.stream, 300 single reads",
                  lambda: [repo.odb.stream(bytes.fromhex(b)).read() for b in blobs[:300]])
        assert ours == theirs, "the two readers disagree"
        for name, seconds in times.items():
            print(f"{name}: {min(seconds) * 1000:.0f} ms (best of {len(seconds)})")
        theirs_pid = repo.git._get_persistent_cmd("cat_file_all", "cat_file", batch=True).proc.pid
        for who, pid in (("GitPython's", theirs_pid), ("pinset's", mirror._reader._session.proc.pid)):
            env = Path(f"/proc/{pid}/environ").read_bytes()
            print(f"{who} git cat-file has GITHUB_TOKEN in its environment: {b'GITHUB_TOKEN=' in env}")


if __name__ == "__main__":
    main()
