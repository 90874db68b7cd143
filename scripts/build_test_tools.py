"""Build the llama.cpp programs the slow tests run (CPU only), with pinset's own builder, once.

CI calls this before pytest and exports what it prints: PINSET_TEST_LLAMA_BIN (llama-perplexity,
llama-bench, llama-imatrix, llama-quantize, test-backend-ops, test-llama-archs; with --mtmd also
test-mtmd-impl, whose libmtmd is ~55 more compile steps, minutes on 2 cores) and PINSET_LLAMA_TREE (its
source, for gguf-py). The build lives in the given cache, so a second run is a ninja no-op.

    eval "$(python scripts/build_test_tools.py --cache ~/.cache/pinset-ci)"
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # pinset and tests.testing, as the tests import them

from pinset import progress  # noqa: E402
from pinset.build.cmake import ensure_build  # noqa: E402
from pinset.build.settings import CPU_BUILD  # noqa: E402
from pinset.store import Store  # noqa: E402
from pinset.upstream.builds import resolve_build  # noqa: E402
from pinset.upstream.mirror import Mirror  # noqa: E402
from tests.testing.snapshots import build_name, keep_downloads, seed_downloads  # noqa: E402

TARGETS = ["llama-perplexity", "llama-bench", "llama-imatrix", "llama-quantize", "test-backend-ops",
           "test-llama-archs"]   # the last: verify's arch check (tests/checks/test_checks_real_programs.py)
MTMD_TARGETS = ["test-mtmd-impl"]   # --mtmd: verify's mtmd check on the real program


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", required=True)
    parser.add_argument("--version", default="0.3.36")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--mtmd", action="store_true", help="also test-mtmd-impl (builds libmtmd)")
    args = parser.parse_args()
    progress.PLAIN_EVERY_S = 30  # .ci/run's log: a line with ninja's [n/N] step every 30 s, not minutes of silence
    store = Store.open(args.cache)
    seed_downloads(store, [args.version])
    mirror = Mirror(store.mirror)
    try:
        build = resolve_build(build_name(args.version), None, Path("."), store, mirror)
        targets = TARGETS + (MTMD_TARGETS if args.mtmd else [])
        built = ensure_build(store, mirror, build.tree, CPU_BUILD, targets, label=f"{build.name}-test-tools",
                             commit=build.commit, pinset_digest="", jobs=args.jobs, progress=True)
    finally:
        mirror.close()
    keep_downloads(store)
    print(f"built {', '.join(targets)} in {built.seconds:.0f} s ({'cached' if built.cached else 'fresh'})",
          file=sys.stderr)
    print(f"export PINSET_TEST_LLAMA_BIN={built.bin_dir} PINSET_LLAMA_TREE={built.source_dir}")


if __name__ == "__main__":
    if not (shutil.which("cmake") and shutil.which("ninja")):
        sys.exit("build_test_tools: cmake and ninja are needed")
    main()
