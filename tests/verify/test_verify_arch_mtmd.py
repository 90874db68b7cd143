"""verify's arch and mtmd checks and the pin set's own checks, end to end on the stand-in tree (real git, CMake,
Ninja builds) whose test-llama-archs and test-mtmd-impl replay the real captured output of the programs
(tests/fixtures/llama-archs, tests/fixtures/mtmd): the argv verify gives them, their counts in the JSON, a
check that ran nothing is red, the pin set's checks run with no pin to carry them, the logger's lost tail."""

from __future__ import annotations

import json
import shutil
import types
from pathlib import Path

import pytest

from pinset.cli import main
from tests.testing import FIXTURES, one_patch, run_doc, write_pins
from tests.testing.stand_in import stand_in_files

pytestmark = pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("cc")
                                     and shutil.which("ctest")), reason="cmake, ninja, ctest and cc are needed")
ARCHS, MTMD = FIXTURES / "llama-archs", FIXTURES / "mtmd"


@pytest.fixture
def pin_set(tmp_path, make_repo):
    up = make_repo("upstream")
    files = {k: v for k, v in stand_in_files().items() if v is not None}
    files.update({"replay/archs-llama-CPU.log": (ARCHS / "llama-cpu.stdout").read_text(),
                  "replay/archs-gpt-oss-CPU.log": (ARCHS / "gpt-oss-cpu.stdout").read_text(),
                  "replay/archs-bert-CPU.log": (ARCHS / "bert-skip-cpu.stdout").read_text(),
                  "replay/archs-kimi-k3-CPU.log": (ARCHS / "nosuch-cpu.stdout").read_text(),
                  "replay/archs-llama-CPU.first.log": (ARCHS / "llama-cpu-lost-tail.stdout").read_text(),
                  "replay/mtmd-test_temporal_merge_grouping.log": (MTMD / "temporal.stdout").read_text(),
                  "replay/mtmd-test_projector_registry.log": (MTMD / "projector-registry-none.stdout").read_text()})
    up.commit("v1", files)
    up.tag("v1")
    work = make_repo("work")
    one_patch(work, tmp_path / "patches" / "arch", {"README": "x\n"}, {"arch.txt": "on\n"}, "arch")
    return write_pins(tmp_path / "pins.yaml", """
        upstream: upstream
        builds: [v1]
        checks:
          - arch: {name: gpt-oss, feature: oss}
        pins:
          - id: arch
            patches: patches/arch
            checks:
              - arch: {name: llama, feature: llama-moe}
              - mtmd: {tests: test_temporal_merge_grouping}
        """)


def run_verify(pins: Path, tmp_path: Path) -> tuple[int, dict]:
    out = tmp_path / "verify.json"
    code = main(["verify", "-c", str(pins), "--json", str(out), "--markdown", str(tmp_path / "verify.md"),
                 "--no-progress", "-j", "2"])
    return code, run_doc(out.read_text())


def feature_gate(doc: dict) -> dict:
    return next(g for g in doc["builds"][0]["gates"] if g["name"] == "feature-checks")


def test_arch_mtmd_and_pin_set_checks_run_and_count(pin_set, tmp_path):
    code, doc = run_verify(pin_set, tmp_path)
    gate = feature_gate(doc)
    checks = {(c["pin"], c["check"]): c for c in gate["checks"]}
    assert code == 0 and gate["status"] == "passed", json.dumps(gate, indent=1)
    assert gate["detail"].startswith("3/3 feature checks on CPU")
    llama = checks[("arch", "arch llama [feature llama-moe]")]
    # the first run lost its tail (the replay of the real lost-tail capture): run again, said
    assert (llama["status"], llama["cases"]) == ("passed", 2)
    assert llama["detail"].startswith("2/2 decoded and matched the CPU on AMD EPYC (run 2 times")
    mtmd = checks[("arch", "mtmd /test_temporal_merge_grouping/")]
    assert (mtmd["status"], mtmd["cases"], mtmd["detail"]) == ("passed", 24, "1 test(s), 24 assertion(s) passed")
    own = checks[("(pin set)", "arch gpt-oss [feature oss]")]
    assert (own["status"], own["cases"]) == ("passed", 1)
    runs = [line.split("/bin/", 1)[1] for line in Path(gate["log"]).read_text().splitlines() if line.startswith("$ ")]
    # exact names, a fixed seed, the backend verify tests; the lost tail run again once
    assert runs == ["test-llama-archs -a '^llama$' -s 1234 -b CPU"] * 2 + [
        "test-mtmd-impl test_temporal_merge_grouping", "test-llama-archs -a '^gpt-oss$' -s 1234 -b CPU"]
    assert "3/3 feature checks on CPU" in (tmp_path / "verify.md").read_text()
    # the PR comment names the pin set's own check as such
    report = tmp_path / "report.md"
    main(["report", str(tmp_path / "verify.json"), "-c", str(pin_set), "--markdown", str(report)])
    assert "`(pin set)` | arch gpt-oss [feature oss]" in report.read_text()


@pytest.mark.parametrize("check,said", [
    ("arch: {name: bert}", "ran nothing: every bert row is SKIP"),
    ("arch: {name: kimi-k3}", "no row for architecture 'kimi-k3'"),
    ("mtmd: {projector: kimik3}", "ran nothing: no test matched the filter"),
])
def test_a_check_that_ran_nothing_is_red_on_the_pin_set_too(pin_set, tmp_path, check, said):
    write_pins(pin_set, pin_set.read_text().replace("arch: {name: gpt-oss, feature: oss}", check))
    code, doc = run_verify(pin_set, tmp_path)
    gate = feature_gate(doc)
    bad = [c for c in gate["checks"] if c["status"] != "passed"]
    assert code == 1 and gate["status"] == "failed" and not doc["ok"]
    assert [c["pin"] for c in bad] == ["(pin set)"] and said in bad[0]["detail"], bad


@pytest.mark.parametrize("device,ok", [("NVIDIA H200", True), ("AMD EPYC", False)])
def test_an_arch_check_on_the_gpu_counts_only_rows_of_the_gpu_the_result_names(tmp_path, device, ok):
    """With --cuda the rows must be the named GPU's (a table of the CPU's rows, e.g. a program that ignored -b,
    is no GPU evidence). The program is a stand-in printing the real CPU capture with its device label set."""
    from pinset.build.cmake import BuiltTree
    from pinset.config.schema import FeatureCheck
    from pinset.verify.gates import Gates, VerifyOptions
    from tests.testing import fake_program

    text = (ARCHS / "llama-cpu.stdout").read_text().replace("AMD EPYC", device.rjust(8) if len(device) < 8 else device)
    (tmp_path / "table.txt").write_text(text)
    fake_program(tmp_path / "bin", "test-llama-archs", f"#!/bin/sh\ncat {tmp_path / 'table.txt'}\n")
    gates = Gates(types.SimpleNamespace(pins=(), checks=()), None, None,
                  VerifyOptions(cuda=True, ops=[], gpu_name="NVIDIA H200", log_dir=tmp_path),
                  lambda _: None)
    built = BuiltTree(tmp_path, tmp_path, tmp_path / "bin", [], 0.0, True)
    result = gates._run_check("p", FeatureCheck("arch", name="llama"), built, "CUDA0", tmp_path / "log")
    assert (result.status == "passed") == ok, result.detail
    if not ok:
        assert result.detail == "CUDA0 rows ran on AMD EPYC, not on NVIDIA H200 that this result names"
