"""CI compile check of our CUDA patch series: the touched translation units compile for sm_90.

No GPU needed: nvcc compiles mmq.cu, the IQ1_M MMQ instance, quantize.cu and test-backend-ops.cpp
of the pinned tree that `pinset apply` writes (llama.cpp 0c1e57098 + patches/cuda-mmq-iq1m).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from pinset.cli import main
from tests.testing import ROOT as REPO
from tests.testing.snapshots import copy_store

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on PATH: the CUDA compile check needs CUDA 12/13"),
]


def test_series_compiles_for_sm90(tmp_path, capsys, snapshot_seed):
    store = copy_store(snapshot_seed[0], tmp_path / "cache")  # 0.3.36 already imported: the test is nvcc's
    tree = tmp_path / "tree"
    assert main(["apply", "-c", str(REPO / "pins.yaml"), "--build", "pypi:llama-cpp-python==0.3.36",
                 "--out", str(tree), "--cache", str(store.root)]) == 0
    assert "GGML_TYPE_IQ1_M" in (tree / "ggml/src/ggml-cuda/mmq.cu").read_text()
    done = subprocess.run(["bash", str(REPO / "tests" / "cuda_compile_check.sh"), str(tree)],
                          capture_output=True, text=True, timeout=1800)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "mmq-instance-iq1_m.cu" in output, output[-2000:]
