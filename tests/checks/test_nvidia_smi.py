"""The one nvidia-smi module: every query goes through it, and a failing nvidia-smi is no GPU."""

import os
import stat

from pinset.checks import nvidia_smi
from pinset.measures import gpu


def fake_smi(tmp_path, monkeypatch, body: str):
    program = tmp_path / "nvidia-smi"
    program.write_text("#!/bin/sh\n" + body)
    program.chmod(program.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


ANSWERS = r'''case "$*" in
  *compute_cap,memory.total*) echo "NVIDIA H200, 580.95.05, 9.0, 143771"; echo "NVIDIA H200, 580.95.05, 9.0, 143771";;
  *index,uuid*) echo "0, GPU-aaaa"; echo "1, GPU-bbbb";;
  *compute_cap*) echo "9.0"; echo "9.0";;
  *clocks.sm*) echo "NVIDIA H200, 580.95.05, 1980, 3201, 1980, 34, 120.5, 0";;
  *compute-apps*) echo "4242, python, 1024 MiB";;
esac
'''


def test_one_module_answers_gpus_uuids_caps_and_snapshots(tmp_path, monkeypatch):
    fake_smi(tmp_path, monkeypatch, ANSWERS)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert [(g.name, g.uuid) for g in nvidia_smi.visible_gpus()] == [("NVIDIA H200", "GPU-bbbb")]
    assert nvidia_smi.cuda_architectures_from_gpu() == "90"
    shot = gpu.snapshot()
    assert shot.sm_clock_mhz == 1980 and shot.power_w == 120.5 and shot.other_processes == ["4242 python 1024 MiB"]


def test_a_failing_nvidia_smi_is_no_gpu_everywhere(tmp_path, monkeypatch):
    fake_smi(tmp_path, monkeypatch, 'echo "NVIDIA-SMI has failed because it couldn\'t communicate, with the driver, 9.0"\n'
                                    'echo 9.0\nexit 9\n')
    assert nvidia_smi.visible_gpus() == []
    assert nvidia_smi.cuda_architectures_from_gpu() is None
    assert gpu.snapshot() is None
    assert nvidia_smi.query_snapshot(0) == (None, [])


def test_without_nvidia_smi_nothing_is_asked(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert nvidia_smi.ask("--query-gpu=name") == ""
    assert nvidia_smi.visible_gpus() == [] and gpu.snapshot() is None
