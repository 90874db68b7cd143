"""Odd program output through verify's real code paths (runner -> parser -> verdict -> gate/check result).

Each fake program is a small script written by the test that prints the odd output; everything after
it is pinset's own code (Gates._run_check, Gates._op_gate, Gates._ctest_gate, probe_machine).
"""

from __future__ import annotations

import json
import os
import stat
import sys
import types
from pathlib import Path

import pytest

from pinset.build.cmake import BuiltTree
from pinset.config.schema import FeatureCheck
from pinset.verify.gates import Gates, VerifyOptions
from pinset.verify.model import GateResult
from tests.testing import FIXTURES

FIX = FIXTURES

MM = "MUL_MAT(type_a=iq1_m,type_b=f32,m=16,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1)"


def backend_ops_output(cases: list[str], backend: str = "CUDA0", *, summary: str | None = None,
                       status: str = "OK", final: str = "2/2 backends passed\nOK", description: bool = True) -> str:
    """A test-backend-ops console run in the H200 layout around the given case lines."""
    passed = sum(c.endswith("): OK") for c in cases)
    return ("Testing 2 devices\n\n"
            f"Backend 1/2: {backend}\n" + ("  Device description: NVIDIA H200\n" if description else "")
            + "  Device memory: 143155 MB (142629 MB free)\n\n"
            + "".join(f"  {c}\n" for c in cases)
            + f"  {summary or f'{passed}/{len(cases)}'} tests passed\n  Backend {backend}: {status}\n"
            + f"Backend 2/2: CPU\n  Skipping\n{final}\n")


def fake_program(path: Path, stdout: str, *, stderr: str = "", exit_code: int = 0) -> Path:
    """An executable that prints the given streams and exits as told, whatever its arguments."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.write({stdout!r})\nsys.stderr.write({stderr!r})\n"
                    f"sys.exit({exit_code})\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.fixture
def built(tmp_path) -> BuiltTree:
    for d in ("src", "build/bin"):
        (tmp_path / d).mkdir(parents=True)
    return BuiltTree(tmp_path / "src", tmp_path / "build", tmp_path / "build" / "bin", [], 0.0, True)


@pytest.fixture
def gates(tmp_path) -> Gates:
    pin_set = types.SimpleNamespace(pins=(), checks=())
    return Gates(pin_set, None, None, VerifyOptions(cuda=True, ops=["MUL_MAT"], log_dir=tmp_path / "logs"),
                 say=lambda *a: None)


def run_backend_op_check(gates, built, tmp_path, stdout: str, *, params: str | None = "type_a=iq1_m",
                         exit_code: int = 0, mode: str = "test"):
    fake_program(built.bin_dir / "test-backend-ops", stdout, exit_code=exit_code)
    check = FeatureCheck("backend-op", op="MUL_MAT", params=params, mode=mode)
    return gates._run_check("pin", check, built, "CUDA0", tmp_path / "check.log")


def test_the_fake_program_itself_passes_when_its_output_is_right(gates, built, tmp_path):
    result = run_backend_op_check(gates, built, tmp_path, backend_ops_output([f"{MM}: OK"]))
    assert result.status == "passed" and result.cases == 1, result.detail


ODD_BACKEND_OPS = [
    ("another op only", backend_ops_output(["ADD(type=f32,ne=[10,5,4,3]): OK"])),
    ("not OK", backend_ops_output([f"{MM}: not OK"], summary="1/1")),
    ("text after OK", backend_ops_output([f"{MM}: OK (but skipped)"], summary="1/1")),
    ("zero cases", backend_ops_output([], summary="0/0")),
    ("no device description", backend_ops_output([f"{MM}: OK"], description=False)),
    ("no backend status line", backend_ops_output([f"{MM}: OK"]).replace("  Backend CUDA0: OK\n", "")),
    ("status line of another backend", backend_ops_output([f"{MM}: OK"]).replace("Backend CUDA0: OK", "Backend CUDA1: OK")),
    ("section of another backend", backend_ops_output([f"{MM}: OK"], backend="CUDA1")),
    ("results for an extra backend", backend_ops_output([f"{MM}: OK"]).replace(
        "Backend 2/2: CPU\n  Skipping\n", f"Backend 2/2: CPU\n  Device description: x\n  {MM}: FAIL\n  0/1 tests passed\n")),
    ("final FAIL", backend_ops_output([f"{MM}: OK"], final="1/2 backends passed\nFAIL")),
    ("type inside a longer value", backend_ops_output([f"{MM.replace('iq1_m', 'iq1_m_xyz')}: OK"])),
    ("type in another key", backend_ops_output([f"{MM.replace('type_a=iq1_m', 'type_a=f16,xtype_a=iq1_m')}: OK"])),
    ("summary disagrees", backend_ops_output([f"{MM}: OK"], summary="5/5")),
    ("case names containing OK", backend_ops_output([f"{MM[:-1]},name=x): OK): FAIL"], summary="1/1")),
]


@pytest.mark.parametrize("name,stdout", ODD_BACKEND_OPS, ids=[n for n, _ in ODD_BACKEND_OPS])
def test_odd_test_backend_ops_output_is_a_failed_check(gates, built, tmp_path, name, stdout):
    result = run_backend_op_check(gates, built, tmp_path, stdout)
    assert result.status == "failed", (name, result.detail)


def test_matched_cases_all_of_another_type_say_so(gates, built, tmp_path):
    other = MM.replace("type_a=iq1_m,type_b=f32", "type_a=f32,type_b=iq1_m")
    result = run_backend_op_check(gates, built, tmp_path, backend_ops_output([f"{other}: OK"]), params="iq1_m")
    assert result.status == "passed"          # a bare word is a plain regex: any parameter may carry it
    result = run_backend_op_check(gates, built, tmp_path, backend_ops_output([f"{other}: OK"]), params="type_a=iq1_m")
    assert result.status == "failed" and result.cases == 0 and "exactly" in result.detail


def test_op_gate_counts_only_the_op_asked_for(gates, built, tmp_path):
    fake_program(built.bin_dir / "test-backend-ops", backend_ops_output(["ADD(type=f32): OK", "ADD(type=f16): OK"]))
    gate = GateResult("backend-ops")
    gates._op_gate(gate, built, [("MUL_MAT", None)], "CUDA0", tmp_path / "gate.log")
    assert gate.status == "failed" and [o.short() for o in gate.ops] == ["MUL_MAT 0/0"]
    assert "2 case(s) of other ops" in gate.detail


def test_exit_code_after_a_clean_output_is_red(gates, built, tmp_path):
    result = run_backend_op_check(gates, built, tmp_path, backend_ops_output([f"{MM}: OK"]), exit_code=3)
    assert result.status == "failed" and "exit 3" in result.detail


# --- ctest / test-chat ---------------------------------------------------------------------------

CTEST_PASS = (FIX / "ctest" / "test-chat-pass.log").read_text()
CTEST_VERBOSE_PASS = (FIX / "ctest" / "ctest-verbose-test-chat.log").read_text()   # ctest -V, as verify runs it


@pytest.fixture
def fake_ctest_path(tmp_path, monkeypatch):
    folder = tmp_path / "fake-path"
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return folder


def test_ctest_gate_passes_on_the_real_capture(gates, built, tmp_path, fake_ctest_path):
    fake_program(fake_ctest_path / "ctest", CTEST_VERBOSE_PASS)
    gate = GateResult("test-chat")
    gates._ctest_gate(gate, built, "test-chat", tmp_path / "ctest.log")
    assert gate.status == "passed", gate.detail


ODD_CTEST = [
    ("no tests found", "Test project /b\nNo tests were found!!!\n"),
    ("zero tests, 100 %", "Test project /b\n\n100% tests passed, 0 tests failed out of 0\n\nTotal Test time (real) =   0.00 sec\n"),
    ("100 % claimed, no result line", "Test project /b\n100% tests passed, 0 tests failed out of 1\n"),
    ("cut short", CTEST_PASS.split("\n100%")[0]),
    ("count says failed", CTEST_PASS.replace("100% tests passed, 0 tests failed", "0% tests passed, 1 tests failed")),
    ("count of another size", CTEST_PASS.replace("out of 1", "out of 2")),
    ("test listed twice", CTEST_PASS.replace("\n\n100%", "\n" + [l for l in CTEST_PASS.splitlines() if "Test #" in l][0]
                                             + "\n\n100%")),
    ("skipped", CTEST_PASS.replace("   Passed", "***Skipped")),
    ("empty", ""),
    ("test-chat exits 0 and prints nothing", CTEST_VERBOSE_PASS.replace("8: \n8: [chat] All tests passed!\n", "")),
    ("no -V output of the test at all", CTEST_PASS),
]


@pytest.mark.parametrize("name,stdout", ODD_CTEST, ids=[n for n, _ in ODD_CTEST])
def test_odd_ctest_output_is_a_failed_gate(gates, built, tmp_path, fake_ctest_path, name, stdout):
    fake_program(fake_ctest_path / "ctest", stdout)
    gate = GateResult("test-chat")
    gates._ctest_gate(gate, built, "test-chat", tmp_path / "ctest.log")
    assert gate.status == "failed", name


# --- command checks --------------------------------------------------------------------------------

@pytest.mark.parametrize("expect,ok", [("version", True), ("x*", False), ("^", False), ("nothing|", False),
                                       ("(?:)", False), (r"\s*", False)])
def test_a_command_check_needs_a_real_match(gates, built, tmp_path, expect, ok):
    fake_program(built.bin_dir / "tool", "tool version 1\n")
    check = FeatureCheck("command", argv=("{bin}/tool",), expect=expect, timeout=30)
    result = gates._run_check("pin", check, built, "CUDA0", tmp_path / "cmd.log")
    assert (result.status == "passed") is ok, result.detail


# --- nvidia-smi ------------------------------------------------------------------------------------

@pytest.mark.parametrize("stdout", [
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
    "NVIDIA driver is installed and running.\n",
    "No devices were found\n",
    "[N/A], [N/A], 9.0, 81559\n",
    "NVIDIA H200, 580.159.04, 9.0, [N/A]\n",
    "NVIDIA H200, 580.159.04, 9.0, 0\n",
    "NVIDIA H200, 580.159.04, nan, 143771\n",
    "NVIDIA H200, driver, 9.0, 143771\n",
    "Failed to initialize NVML: a, b, 9.0, 1\n",
    "name, temperature.gpu\nNVIDIA H200, 580.159.04, 9.0, 143771\n",
])
def test_malformed_nvidia_smi_is_no_gpu(tmp_path, fake_ctest_path, stdout):
    from pinset.checks.machine import probe_machine

    fake_program(fake_ctest_path / "nvidia-smi", stdout)
    machine = probe_machine()
    assert machine.gpu is None and machine.gpus == 0, json.dumps(machine.to_json())


def test_well_formed_nvidia_smi_is_the_gpu(tmp_path, fake_ctest_path):
    from pinset.checks.machine import probe_machine

    fake_program(fake_ctest_path / "nvidia-smi", "NVIDIA H200, 580.159.04, 9.0, 143771\n")
    machine = probe_machine()
    assert machine.gpus == 1 and machine.gpu.name == "NVIDIA H200" and machine.gpu.memory_mib == 143771


@pytest.mark.parametrize("what", ["not executable", "a folder", "no interpreter line"])
def test_a_command_check_that_cannot_start_is_a_failed_check(gates, built, tmp_path, what):
    # PermissionError / ENOEXEC from exec came out of verify as a Python traceback
    target = built.source_dir / "tool"
    if what == "a folder":
        target.mkdir()
    else:
        target.write_text("echo version\n" if what == "no interpreter line" else "#!/bin/sh\necho version\n")
        if what == "no interpreter line":
            target.chmod(0o755)
    check = FeatureCheck("command", argv=("{src}/tool",), expect="version", timeout=30)
    result = gates._run_check("pin", check, built, "CUDA0", tmp_path / "cmd.log")
    assert result.status == "failed" and "exit 126" in result.detail and "tool" in result.detail, result.detail


@pytest.mark.parametrize("listing", ["[]", "null", '"x"', '{"tests": {"a": 1}}', '{"tests": [1, "x"]}',
                                     '{"tests": [{"name": "t", "command": "bin/t"}]}', '{"tests": [{"name": 3}]}'])
def test_an_odd_ctest_listing_gives_no_targets_not_a_traceback(listing):
    from pinset.verify.plan import ctest_targets

    assert ctest_targets(listing, ["t"]) in ([], ["t"])
