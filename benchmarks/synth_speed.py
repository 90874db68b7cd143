"""Time and peak memory of writing a full-size synthetic model directly (no F16, no imatrix).

    PINSET_LLAMA_TREE=<llama.cpp tree> python benchmarks/synth_speed.py --dir /work/tmp-synth \
        [--size a3b] [--quant IQ1_M] [-t N] [--bin build/bin] [--keep]

Writes the model into a fresh folder under --dir (deleted afterwards unless --keep), prints the wall
time, the throughput and the process's peak resident memory (ru_maxrss), then, with --bin, lets
llama-bench (CPU) load and run it as the proof that the file is a working model.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pinset.models.gguf_module import candidate_trees  # noqa: E402
from pinset.models.synth import find_vocab, preset, write_synthetic_gguf  # noqa: E402


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, required=True, help="folder for the temporary model (needs ~9 GB free)")
    ap.add_argument("--arch", default="qwen3moe")
    ap.add_argument("--size", default="a3b")
    ap.add_argument("--quant", default="IQ1_M")
    ap.add_argument("--layers", type=int)
    ap.add_argument("-t", "--threads", type=int)
    ap.add_argument("--bin", type=Path, help="llama.cpp build/bin: run llama-bench -p 32 -n 4 on the model (CPU)")
    ap.add_argument("--keep", action="store_true", help="keep the model (its path is printed)")
    args = ap.parse_args()

    shape = preset(args.arch, args.size, n_layer=args.layers)
    vocab = find_vocab(shape.vocab, candidate_trees([args.bin]))
    args.dir.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="synth-speed-", dir=args.dir))
    try:
        print(f"{shape.describe()} -> {args.quant}, direct, threads {args.threads or 'auto'}")
        rss0 = peak_rss_mib()
        t0 = time.monotonic()
        res = write_synthetic_gguf(shape, folder / f"synth-{args.size}-{args.quant}.gguf", vocab_path=vocab,
                                   quant=args.quant, threads=args.threads)
        seconds = time.monotonic() - t0
        print(f"wrote {res.path} ({res.size_bytes / 1e9:.2f} GB, {res.n_params / 1e9:.2f} B weights, "
              f"{res.tensor_types}) in {seconds:.1f} s = {res.size_bytes / 1e6 / seconds:.0f} MB/s; "
              f"peak RSS {peak_rss_mib():.0f} MiB (before writing: {rss0:.0f} MiB)")
        if args.bin:
            t0 = time.monotonic()
            done = subprocess.run([str(args.bin / "llama-bench"), "-m", str(res.path), "-p", "32", "-n", "4",
                                   "-r", "1", "-o", "md"], capture_output=True, text=True, timeout=3600)
            print(done.stdout.strip() or done.stderr[-2000:])
            print(f"llama-bench exit {done.returncode} after {time.monotonic() - t0:.0f} s")
            if done.returncode:
                return 1
        if args.keep:
            print(f"kept {res.path}")
    finally:
        if not args.keep:
            shutil.rmtree(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
