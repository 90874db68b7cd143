"""Provenance parsers on the tools' real version output (captured on this machine, see fixtures/README)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinset.checks.machine import (parse_cc_version, parse_cmake_version, parse_nvcc_version, parse_nvidia_smi,
                                   probe_machine)

FIX = Path(__file__).parent / "fixtures" / "verify"


def test_nvcc_version():
    assert parse_nvcc_version((FIX / "nvcc-version-13.0.txt").read_text()) == "13.0.88"


def test_compiler_and_cmake():
    assert parse_cc_version((FIX / "cxx-version-gcc12.txt").read_text()) == "c++ (Debian 12.2.0-14+deb12u1) 12.2.0"
    assert parse_cmake_version((FIX / "cmake-version.txt").read_text()) == "3.25.1"


def test_nvidia_smi_csv():
    # the query probe_machine runs, captured on the H200 (see fixtures/README)
    h200 = FIX / "nvidia-smi-h200.csv"
    if not h200.exists():
        pytest.skip("no H200 nvidia-smi capture yet")
    gpus = parse_nvidia_smi(h200.read_text())
    assert gpus and gpus[0].name == "NVIDIA H200" and gpus[0].compute_capability == "9.0"
    assert gpus[0].memory_mib > 100_000 and gpus[0].driver


def test_probe_machine_runs_without_a_gpu():
    machine = probe_machine()
    doc = machine.to_json()
    assert doc["hostname"] and doc["cmake"] and set(doc) >= {"gpu", "cuda_version", "compiler"}
