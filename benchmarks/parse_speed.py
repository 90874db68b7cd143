"""Time the output parsers on large synthetic logs in the real programs' formats: they must stay linear.

    PYTHONPATH=. python benchmarks/parse_speed.py [--cases 100000] [--repeat 1]

test-backend-ops `test` and `perf` logs with N case lines (the line format of
tests/fixtures/backend-ops/h200-test-MUL_MAT.log and h200-perf-mm-iq1_s.log: CUDA graph log lines between
cases, `N/M tests passed`, `Backend CUDA0: OK`, `Skipping` CPU section), judged with and without `-o`/`-p`
as verify does; a ctest log with N/10 tests; a llama-bench JSONL with N/10 rows; a perplexity --kl-divergence
stdout with N/10 chunks; a single test-backend-ops line of 10 N `A(x `, a ctest line and a perplexity statistics block with runs of N
blanks (a broken program's output). Each is also timed at half the size: the ratio full/half near 2 is linear, near 4
quadratic.
"""

from __future__ import annotations

import argparse
import json
import time

from pinset.checks.backend_ops import judge_backend_ops, parse_backend_ops
from pinset.checks.ctest import judge_ctest, parse_ctest
from pinset.measures.llama_bench import parse_jsonl
from pinset.measures.perplexity import parse_perplexity

TYPES = ["f32", "f16", "bf16", "q4_0", "q8_0", "iq1_s", "iq1_m", "iq2_xs"]


def backend_ops_log(cases: int, mode: str = "test") -> str:
    out = ["ggml_cuda_init: found 1 CUDA devices (Total VRAM: 143155 MiB):",
           "  Device 0: NVIDIA H200, compute capability 9.0, VMM: yes, VRAM: 143155 MiB",
           "Testing 2 devices", "", "Backend 1/2: CUDA0", "  Device description: NVIDIA H200",
           "  Device memory: 143155 MB (142629 MB free)", ""]
    for i in range(cases):
        name = (f"MUL_MAT(type_a={TYPES[i % len(TYPES)]},type_b=f32,m={16 + i % 4096},n={1 + i % 17},k=256,"
                f"bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,src_overlap=0,m_v=0,pad=0)")
        result = "OK" if mode == "test" else "             53676 runs -    18.68 us/run - 117.44 MFLOP/run -   6.29 TFLOPS"
        out.append(f"  {name}: {result}")
        if i % 5 == 0:
            out.append("ggml_backend_cuda_graph_compute: CUDA graph warmup complete")
    if mode == "test":
        out.append(f"  {cases}/{cases} tests passed")
    out += ["  Backend CUDA0: OK", "Backend 2/2: CPU", "  Skipping", "2/2 backends passed", "OK", ""]
    return "\n".join(out)


def ctest_log(tests: int) -> str:
    out = ["Test project /tmp/build"]
    for i in range(1, tests + 1):
        out.append(f"{i:>5}/{tests} Test #{i:<5}: test-case-{i} {'.' * 20}   Passed    0.01 sec")
    out += ["", f"100% tests passed, 0 tests failed out of {tests}", "", "Total Test time (real) =   1.00 sec"]
    return "\n".join(out) + "\n"


def llama_bench_jsonl(rows: int) -> str:
    lines = []
    for i in range(rows):
        samples = [100.0 + i % 7, 101.0, 99.0]
        lines.append(json.dumps({"build_commit": "0c1e570", "build_number": 1, "model_type": "qwen3moe 30B.A3B IQ1_M",
                                 "model_size": 1000, "n_prompt": 512 * (1 + i % 4), "n_gen": 0, "n_depth": 0,
                                 "avg_ts": sum(samples) / 3, "stddev_ts": 1.0, "samples_ts": samples,
                                 "backends": "CUDA", "gpu_info": "NVIDIA H200"}))
    return "\n".join(lines) + "\n"


def kld_stdout(chunks: int) -> tuple[str, str]:
    rows = [f"{i:>4}    {2.1 + i % 3 / 10:.4f} ±    0.0100      -0.00123 ±    0.00010       0.01234 ±    0.00100     "
            f"1.234 ±  0.010 %    98.765 ±  0.100 %" for i in range(1, chunks + 1)]
    stdout = "\n".join([
        "chunk             PPL          ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p",
        *rows, "", "====== Perplexity statistics ======", "Mean PPL(Q)                   :   2.184104 ±   0.012345",
        "Mean PPL(base)                :   2.180000 ±   0.012000", "", "====== KL divergence statistics ======",
        "Mean    KLD:   0.012345 ±   0.000100", "Maximum KLD:   1.234567", "99.9%   KLD:   0.500000",
        "99.0%   KLD:   0.100000", "Median  KLD:   0.005000", "Minimum KLD:   0.000001", ""])
    stderr = (f"build: 1 (0c1e570)\nperplexity: calculating perplexity over {chunks} chunks, n_ctx=512\n")
    return stdout, stderr


def timed(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    n = args.cases
    print(f"command: PYTHONPATH=. python benchmarks/parse_speed.py --cases {n} --repeat {args.repeat}")

    def bops(size, mode, **kw):
        text = backend_ops_log(size, mode)
        return lambda: judge_backend_ops(parse_backend_ops(text), "CUDA0", returncode=0, mode=mode, **kw)

    def ct(size):
        text = ctest_log(size)
        return lambda: judge_ctest(parse_ctest(text), returncode=0)

    def lb(size):
        text = llama_bench_jsonl(size)
        return lambda: parse_jsonl(text)

    def ppl(size):
        stdout, stderr = kld_stdout(size)
        return lambda: parse_perplexity(stdout, stderr)

    def long_line(size):
        text = "Backend 1/1: CPU\n  Device description: x\n  " + "A(x " * size + "\n"
        return lambda: parse_backend_ops(text)

    def ctest_blanks(size):
        text = "Test project /b\n1/1 Test #1: t " + " " * size + "x\n"
        return lambda: parse_ctest(text)

    def kld_blanks(size):
        stdout, stderr = kld_stdout(10)
        header = "====== KL divergence statistics ======\n"
        stdout = stdout.replace(header, header + "\n" * size + "Mean    KLD" + " " * size + "x\n")
        return lambda: parse_perplexity(stdout, stderr)

    jobs = [
        ("ctest, a non-result line with N blanks (hostile)", n, ctest_blanks),
        ("perplexity, N blank lines + N blanks after a label", n, kld_blanks),
        ("test-backend-ops, one line of N x 'A(x ' (hostile)", n * 10, long_line),
        ("test-backend-ops test", n, lambda s: bops(s, "test")),
        ("test-backend-ops test -o MUL_MAT -p type_a=iq1_s", n,
         lambda s: bops(s, "test", op="MUL_MAT", params="type_a=iq1_s")),
        ("test-backend-ops perf -o MUL_MAT", n, lambda s: bops(s, "perf", op="MUL_MAT")),
        ("ctest", n // 10, ct),
        ("llama-bench JSONL", n // 10, lb),
        ("perplexity --kl-divergence", n // 10, ppl),
    ]
    print(f"{'parser':<50} {'lines':>8} {'seconds':>8} {'half':>8} {'ratio':>6}")
    for name, size, make in jobs:
        full = timed(make(size), args.repeat)
        half = timed(make(size // 2), args.repeat)
        print(f"{name:<50} {size:>8} {full:>8.2f} {half:>8.2f} {full / half if half else float('nan'):>6.2f}")


if __name__ == "__main__":
    main()
