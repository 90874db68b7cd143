"""Fake llama-bench and llama-perplexity programs: small scripts that print real captured output
(tests/fixtures/llama-bench, tests/fixtures/perplexity), with speeds, noise or lines under the test's control;
everything else a test runs is pinset's own code."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from pinset.cli import main
from tests.testing import FIXTURES, run_doc

FAKE = """#!{python}
# A fake llama-bench: prints the recorded jsonl lines with speeds = SPEED x (1 + NOISE x N(0,1)) per test,
# the noise drawn from a counter kept next to this program, so every run differs.
import json, random, sys
from pathlib import Path
here = Path(__file__).parent
count = here / "count"
n = int(count.read_text()) if count.exists() else 0
count.write_text(str(n + 1))
rng = random.Random({seed} * 100003 + n)
for line in {lines!r}:
    d = json.loads(line)
    speed = {speeds!r}[d["n_prompt"] and "pp" or "tg"] * (1.0 + {noise} * rng.gauss(0.0, 1.0))
    d["samples_ts"] = [speed] * int(sys.argv[sys.argv.index("-r") + 1])  # one sample per -r repetition
    d["avg_ts"] = speed
    print(json.dumps(d))
"""


# the tests of the fixture's lines (llama-bench runs pp512 and tg128 unless -p / -n say otherwise)
FIXTURE_TESTS = ["-p", "64,128", "-n", "16", "-ub", "64,128", "-b", "128"]


def fake_bin(folder: Path, speeds: dict, noise: float, seed: int) -> Path:
    folder.mkdir(parents=True)
    lines = (FIXTURES / "llama-bench" / "cpu-tiny-moe-iq1m.jsonl").read_text().splitlines()
    exe = folder / "llama-bench"
    exe.write_text(FAKE.format(python=sys.executable, lines=lines, speeds=speeds, noise=noise, seed=seed))
    exe.chmod(0o755)
    return folder


def bench(tmp_path, base, head, *extra):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    out = tmp_path / "bench.json"
    rc = main(["bench", "--base-bin", str(base), "--head-bin", str(head), "--cpu", "-m", str(model), "-r", "1",
               "--json", str(out), *extra, "--", *FIXTURE_TESTS])
    return rc, run_doc(out.read_text()) if out.exists() else None


REF_OUT = (FIXTURES / "perplexity" / "ref-cpu-f16.stdout").read_text()


REF_ERR = (FIXTURES / "perplexity" / "ref-cpu-f16.stderr").read_text()


KLD_OUT = (FIXTURES / "perplexity" / "kld-iq1m-vs-f16.stdout").read_text()


KLD_ERR = (FIXTURES / "perplexity" / "kld-iq1m-vs-f16.stderr").read_text()


# a real --kl-divergence run whose output ended after chunk 1 of 2 (llama.cpp's log thread lost the rest at exit)
CUT_OUT = (FIXTURES / "perplexity" / "kld-cut-at-exit.stdout").read_text()
CUT_ERR = (FIXTURES / "perplexity" / "kld-cut-at-exit.stderr").read_text()
# the reference run's stderr as that loss ends it: before its final estimate
REF_CUT_ERR = REF_ERR[: REF_ERR.index("Final estimate")]


# what llama.cpp prints at -lv 4 when it loads the model onto an H200 (src/llama.cpp, src/llama-model.cpp)
DEVICE_LINES = ("0.00.412.100 I llama_model_load_from_file_impl: using device CUDA0 (NVIDIA H200) (0000:19:00.0)"
                " - 142629 MiB free\n0.00.512.300 I load_tensors: offloaded 5/5 layers to GPU\n")


def write_script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\nimport sys\n{body}")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.fixture(autouse=True)
def visible_gpu(tmp_path, monkeypatch):
    """A device run needs a visible GPU before it starts: an nvidia-smi that names one compute capability
    (and answers nothing else, so no GPU snapshot is taken)."""
    write_script(tmp_path / "smi" / "nvidia-smi",
                 'if "--query-gpu=compute_cap" in sys.argv:\n    print("9.0")\nelse:\n    sys.exit(9)\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'smi'}{os.pathsep}{os.environ['PATH']}")


def fake_perplexity(bin_dir: Path, kld_stdout: str = KLD_OUT, device_lines: str = DEVICE_LINES,
                    ref_stderr: str = REF_ERR, cut: tuple[int, ...] = (), stderr_first: str = "") -> None:
    """llama-perplexity: the reference run writes its logits file; a --kl-divergence run prints the KLD
    blocks, and the device lines only when asked for -lv 4 (as llama.cpp does). cut: the runs (1 = the first
    reference or KLD run of this program, counted in bin_dir/runs) whose output ends early, exit 0, as
    llama.cpp's log thread leaves it when the process exits first. stderr_first: a line every run prints first."""
    write_script(bin_dir / "llama-perplexity", f"""
from pathlib import Path
args = sys.argv[1:]
sys.stderr.write({stderr_first!r})
if "--kl-divergence-base" in args:
    runs = Path(__file__).with_name("runs")
    n = int(runs.read_text()) + 1 if runs.exists() else 1
    runs.write_text(str(n))
    cut = n in {tuple(cut)!r}
if "--kl-divergence" not in args:
    open(args[args.index("--kl-divergence-base") + 1], "wb").write(b"logits")
    sys.stdout.write({REF_OUT!r}); sys.stderr.write({REF_CUT_ERR!r} if cut else {ref_stderr!r})
elif cut:
    sys.stdout.write({CUT_OUT!r}); sys.stderr.write({CUT_ERR!r})
else:
    verbose = "-lv" in args and int(args[args.index("-lv") + 1]) >= 4
    sys.stdout.write({kld_stdout!r}); sys.stderr.write({KLD_ERR!r} + ({device_lines!r} if verbose else ""))
""")
