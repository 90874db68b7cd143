"""`pinset verify` under adversarial options, programs and interruptions: what would make it claim more
than it ran (a CPU backend standing in for the GPU, a stale green JSON) or crash with a traceback."""

from __future__ import annotations

import pytest

from pinset.cli import main
from tests.testing import write_pins


@pytest.fixture
def pins(tmp_path):
    return write_pins(tmp_path / "pins.yaml", """
        upstream: upstream
        builds: [v1]
        pins: []
        """)


@pytest.mark.parametrize("backend", ["CPU", "cpu", "BLAS", "Vulkan0", "CUDA", "CUDA0,CPU"])
def test_the_gpu_gates_never_run_on_a_cpu_or_other_backend(pins, tmp_path, capsys, backend):
    # `--cuda --backend CPU` ran the "GPU" gates and feature checks on the CPU backend of the CUDA build and
    # said "all gates green", "N/N feature checks on GPU"
    assert main(["verify", "-c", str(pins), "--cuda", "--backend", backend, "--json", str(tmp_path / "v.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"pinset verify: error: --backend {backend}: ") and "CUDA0" in err[0]
    assert not (tmp_path / "v.json").exists()


def test_backend_without_cuda_is_refused(pins, capsys):
    assert main(["verify", "-c", str(pins), "--backend", "CUDA1"]) == 2
    assert capsys.readouterr().err.strip() == "pinset verify: error: --backend needs --cuda"


def test_the_summary_names_the_gpu_gates_that_passed():
    # --cuda, every gate green, no pin with a feature check: not "all gates green", and not silent on the GPU
    from pinset.verify.model import GATES, BuildVerification, GateResult, VerifyResult

    gates = [GateResult(n, "passed", 1.0) for n in GATES]
    gates[-1].status, gates[-1].extra["not_requested"] = "not-run", True
    result = VerifyResult("d", {"hostname": "h", "gpu": None}, [BuildVerification("b1", "c", [], gates)], True)
    assert result.ok and result.summary() == "CPU and GPU gates green; no feature check run"
