"""The CPU gate's test-backend-ops runs scoped to what the pins change (plan.cpu_gate_scope): none for a pin
in docs/ or common/, the mat-muls for quants/mmq code, the named ops for other compute code, and every op
of the gate when a pin's files are unknown."""

from __future__ import annotations

import json

from pinset.cli import main
from pinset.config.schema import FeatureCheck
from pinset.verify import plan
from tests.testing import one_patch, one_pin_yaml
from tests.verify.test_verify_gates import gates, pytestmark, upstream  # noqa: F401  (fixture, skip mark)

ALL = ["MUL_MAT", "MUL_MAT_ID"]


def test_no_compute_code_runs_no_op_of_the_pins():
    ops, why = plan.cpu_gate_scope([["common/arg.cpp"], ["docs/build.md", "tests/test-chat.cpp"]], set())
    assert ops == [] and why.startswith("no pin changes ggml compute code (evidence rules: common/arg.cpp and 2 more")
    assert plan.cpu_gate_runs([], [], ops=ops) == []


def test_backend_op_checks_still_run_without_compute_code():
    check = FeatureCheck("backend-op", op="MUL_MAT", params="type_a=iq1_m")
    assert plan.cpu_gate_runs(["iq1_m"], [check], ops=[]) == [("MUL_MAT", "type_a=iq1_m")]


def test_matmul_code_runs_the_two_matmul_ops():
    for files in (["ggml/src/ggml-cpu/quants.c"], ["ggml/src/ggml-cuda/mmq.cuh", "docs/x.md"],
                  ["ggml/src/ggml-cpu/arch/x86/quants.c"]):
        ops, why = plan.cpu_gate_scope([files], {"GGML_OP_SOFT_MAX"})
        assert ops == ALL and why.startswith("matrix-multiply code only"), files


def test_other_compute_code_adds_the_ops_its_lines_name():
    ops, why = plan.cpu_gate_scope([["ggml/src/ggml-cpu/ops.cpp"]],
                                   {"GGML_OP_SOFT_MAX", "GGML_UNARY_OP_GELU", "GGML_OP_COUNT", "GGML_TYPE_Q4_K"})
    assert ops == ALL + ["GELU", "SOFT_MAX"] and "ops named on the added lines: GELU, SOFT_MAX" in why
    runs = plan.cpu_gate_runs(["q4_K"], [], ops=ops)
    assert runs == [("MUL_MAT", "type_a=(q4_K),"), ("MUL_MAT_ID", "type_a=(q4_K),"), ("GELU", None), ("SOFT_MAX", None)]


def test_test_backend_ops_cases_are_compute():
    assert plan.cpu_gate_scope([["tests/test-backend-ops.cpp"]], set())[0] == ALL


def test_unknown_files_run_every_op_of_the_gate():
    assert plan.cpu_gate_scope([["common/arg.cpp"], None], set())[0] == ALL
    assert plan.cpu_gate_scope(None, set())[0] == ALL
    assert plan.cpu_gate_scope([["CMakeLists.txt"]], set())[0] == ALL


def test_cpu_params_always_runs_the_matmuls():
    assert plan.cpu_gate_runs([], [], params_override="k=256", ops=[]) == [("MUL_MAT", "k=256"), ("MUL_MAT_ID", "k=256")]


def test_a_docs_only_pin_set_skips_the_cases_and_says_so(tmp_path, make_repo, upstream):  # noqa: F811
    one_patch(make_repo("work"), tmp_path / "patches" / "docs",
              {"README": "x\n"}, {"docs/notes.md": "how pinned builds are configured\n"}, "docs")
    pins = one_pin_yaml(tmp_path / "pins.yaml", "upstream", "docs", "v1", patches="patches/docs",
                        unchecked="documentation only")
    out = tmp_path / "verify.json"
    code = main(["verify", "-c", str(pins), "--json", str(out), "--no-progress", "-j", "2"])
    doc = json.loads(out.read_text())
    g = gates(doc["builds"][0])["cpu-backend-ops"]
    assert code == 0 and doc["ok"], doc["summary"]
    assert g["status"] == "not-run" and g["not_requested"] and not g.get("ops")
    assert g["scope"] == "no pin changes ggml compute code (evidence rules: docs/notes.md)"
    assert {"what": "CPU test-backend-ops cases", "why": g["scope"]} in doc["builds"][0]["not_tested"]
    assert "CPU gates green" not in doc["summary"]   # it claims no more than ran
