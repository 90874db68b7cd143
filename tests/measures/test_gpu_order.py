"""kld and bench run their GPU programs with CUDA_DEVICE_ORDER=PCI_BUS_ID, as verify's gates do: CUDA numbers
GPUs fastest first, nvidia-smi (and so the GPU a result records, CUDA_VISIBLE_DEVICES applied) by PCI bus."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pinset.measures.bench_run import run_side
from pinset.measures.kld import Reference, device_run
from pinset.measures.sides import Side

RECORDER = """#!{python}
import os
from pathlib import Path
Path({out!r}).write_text(os.environ.get("CUDA_DEVICE_ORDER", "<unset>") + "|" + os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"))
"""


def side_with(tmp_path: Path, program: str) -> tuple[Side, Path]:
    out = tmp_path / "seen.txt"
    (tmp_path / "bin").mkdir(parents=True, exist_ok=True)
    exe = tmp_path / "bin" / program
    exe.write_text(RECORDER.format(python=sys.executable, out=str(out)))
    exe.chmod(0o755)
    return Side("head", "b", "c0ffee", tmp_path / "bin", None), out


@pytest.mark.parametrize("cpu", [False, True])
@pytest.mark.parametrize("user_order", [None, "FASTEST_FIRST"])
def test_programs_see_the_pci_order_on_the_gpu_and_no_gpu_on_the_cpu(tmp_path, monkeypatch, cpu, user_order):
    if user_order is None:
        monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    else:
        monkeypatch.setenv("CUDA_DEVICE_ORDER", user_order)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    gpu_seen = (user_order or "PCI_BUS_ID") + "|1"
    cpu_seen = (user_order or "<unset>") + "|"

    side, seen = side_with(tmp_path / "bench", "llama-bench")
    run_side(side, model, ["-p", "8"], 1, cpu=cpu)
    assert seen.read_text() == (cpu_seen if cpu else gpu_seen)

    side, seen = side_with(tmp_path / "kld", "llama-perplexity")
    device_run(side, model, Reference(tmp_path / "ref.bin", None, False, "k", "b", "c0ffee"), 128, 1, cpu=cpu)
    assert seen.read_text() == (cpu_seen if cpu else gpu_seen)
