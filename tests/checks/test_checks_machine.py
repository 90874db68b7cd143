"""Provenance parsers on the tools' real version output (captured on this machine, see fixtures/README)."""

from __future__ import annotations

from pinset.checks.machine import parse_cc_version, parse_cmake_version, parse_nvcc_version, probe_machine
from pinset.checks.nvidia_smi import parse_nvidia_smi
from tests.testing import FIXTURES

FIX = FIXTURES / "verify"


def test_nvcc_version():
    assert parse_nvcc_version((FIX / "nvcc-version-13.0.txt").read_text()) == "13.0.88"


def test_compiler_and_cmake():
    assert parse_cc_version((FIX / "cxx-version-gcc12.txt").read_text()) == "c++ (Debian 12.2.0-14+deb12u1) 12.2.0"
    assert parse_cmake_version((FIX / "cmake-version.txt").read_text()) == "3.25.1"


def test_nvidia_smi_csv():
    # real output on the H200 x2 machine (reports/h200/results/machine.txt): --format=csv with a header,
    # units and two more columns than verify asks for
    gpus = parse_nvidia_smi((FIX / "nvidia-smi-h200x2-header.csv").read_text())
    assert len(gpus) == 2
    assert (gpus[0].name, gpus[0].driver, gpus[0].compute_capability, gpus[0].memory_mib) == \
        ("NVIDIA H200", "580.159.04", "9.0", 143771)
    assert parse_nvidia_smi("") == []


def test_probe_machine_runs_without_a_gpu():
    machine = probe_machine()
    doc = machine.to_json()
    assert doc["hostname"] and doc["cmake"] and set(doc) >= {"gpu", "cuda_version", "compiler"}
