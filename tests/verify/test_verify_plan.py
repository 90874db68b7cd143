"""What verify decides to test: the pins' types, the CPU gate's runs, targets, command placeholders."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pinset.config.schema import FeatureCheck, load_pinset
from pinset.errors import PinsetError
from pinset.sim.changes import combine, parse_patch
from pinset.verify import plan
from tests.testing import FIXTURES

FIX = FIXTURES
CPU_GATE = FIX / "verify" / "cpu-gate"

# the shape of ggml/src/ggml.c's type_traits table (two entries; K-quants keep a capital K)
GGML_C = """
    [GGML_TYPE_Q4_K] = {
        .type_name                = "q4_K",
        .blck_size                = QK_K,
    },
    [GGML_TYPE_IQ1_S] = {
        .type_name                = "iq1_s",
        .blck_size                = QK_K,
    },
"""


def test_types_of_a_real_patch():
    pinset = load_pinset(CPU_GATE / "pins.yaml")
    pin = pinset.pin("iq1s-mmvq-cases")
    change = combine([parse_patch(p.read_text()) for p in pin.patch_files()])
    symbols = set().union(*(f.symbols for f in change.values()))
    assert plan.pin_types(symbols, plan.ggml_type_names(GGML_C)) == ["iq1_s"]


def test_type_names_come_from_the_tree():
    names = plan.ggml_type_names(GGML_C)
    assert names == {"Q4_K": "q4_K", "IQ1_S": "iq1_s"}
    assert plan.pin_types({"GGML_TYPE_Q4_K", "GGML_TYPE_COUNT", "GGML_OP_MUL_MAT"}, names) == ["q4_K"]


def test_types_filter_selects_exactly_those_weight_types():
    regex = plan.types_params_regex(["iq1_m", "iq1_s"])
    case = "type_a={},type_b=f32,m=16,n=1,k=256,bs=[1,1]"
    assert re.search(regex, case.format("iq1_m")) and re.search(regex, case.format("iq1_s"))
    assert not re.search(regex, case.format("iq2_s")) and not re.search(regex, case.format("iq1_s_x"))
    assert plan.types_params_regex([]) is None


def test_cpu_gate_runs():
    checks = [FeatureCheck("backend-op", op="MUL_MAT_ID", params="n_mats=128"),
              FeatureCheck("backend-op", op="MUL_MAT", params="x", mode="perf"),
              FeatureCheck("ctest", name="test-chat")]
    runs = plan.cpu_gate_runs(["iq1_m"], checks)
    assert runs == [("MUL_MAT", "type_a=(iq1_m),"), ("MUL_MAT_ID", "type_a=(iq1_m),"), ("MUL_MAT_ID", "n_mats=128")]
    # a check on one of the pins' types is inside the types run already; other filters are not
    covered = [FeatureCheck("backend-op", op="MUL_MAT_ID", params="type_a=iq1_m"),
               FeatureCheck("backend-op", op="MUL_MAT", params="type_a=iq1_m,type_b=f32,m=512"),
               FeatureCheck("backend-op", op="MUL_MAT", params="type_a=q4_0"),
               FeatureCheck("backend-op", op="PAD", params="type_a=iq1_m")]
    assert plan.cpu_gate_runs(["iq1_m"], covered)[2:] == [("MUL_MAT", "type_a=q4_0"), ("PAD", "type_a=iq1_m")]
    assert plan.cpu_gate_runs([], [])[0] == ("MUL_MAT", None)
    assert plan.cpu_gate_runs(["iq1_m"], [], params_override="k=2048")[0] == ("MUL_MAT", "k=2048")


def test_command_placeholders_and_targets():
    check = FeatureCheck("command", argv=("{bin}/llama-quantize", "--help", "{src}/models", "{x}"), expect="IQ1_M")
    assert plan.command_targets(check) == ["llama-quantize"]
    argv = plan.substitute(check.argv, bin_dir=Path("/b/bin"), build_dir=Path("/b"), source_dir=Path("/s"))
    assert argv == ["/b/bin/llama-quantize", "--help", "/s/models", "{x}"]


def test_ctest_targets_from_show_only_json():
    listing = (FIX / "ctest" / "show-only-json-v1.json").read_text()
    assert plan.ctest_targets(listing, ["test-pass"]) == ["sh"]
    assert plan.ctest_targets(listing, ["nope"]) == [] and plan.ctest_targets("not json", ["x"]) == []
    # not built yet: ctest lists no command, the test name is the target
    assert plan.ctest_targets('{"tests": [{"name": "test-chat", "properties": []}]}', ["test-chat"]) == ["test-chat"]
    assert plan.ctest_regex_escape("test-chat") == "test-chat"
    assert plan.ctest_regex_escape("a.b+c") == r"a\.b\+c"


def test_pin_ref_hashes_the_patch_series():
    pinset = load_pinset(CPU_GATE / "pins.yaml")
    ref = plan.pin_ref(pinset.pin("docs-note"))
    assert re.fullmatch(r"[0-9a-f]{12}", ref) and ref != plan.pin_ref(pinset.pin("iq1s-mmvq-cases"))


def test_ops_option():
    assert plan.parse_ops(None) == ["MUL_MAT", "MUL_MAT_ID", "PAD", "GET_ROWS"]
    assert plan.parse_ops("MUL_MAT, PAD") == ["MUL_MAT", "PAD"]
    with pytest.raises(PinsetError):
        plan.parse_ops("mul_mat")
