"""The evidence a pin needs, by the files it touches (pinset.sim.evidence), pins.yaml's `evidence:` override,
and the report's verdict using them: a pin that rewords a message in common/ can be ready on sim + verify."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pinset.cli import main
from pinset.config.schema import load_pinset
from pinset.errors import ConfigError
from pinset.results import Doc
from pinset.sim.evidence import (
    CUDA,
    DECLARED,
    GGML,
    OTHER,
    TESTS,
    UNKNOWN,
    VERIFY_ONLY,
    file_class,
    pin_needs,
)
from pinset.sim.model import SimResult
from tests import regen_report_goldens as goldens
from tests.testing import run_doc

GREEN = goldens.FIXTURES / "green"


@pytest.mark.parametrize("path, rule", [
    ("ggml/src/ggml-cuda/mmq.cu", CUDA), ("ggml/src/ggml-cuda/common.cuh", CUDA), ("ggml/src/ggml-cuda/CMakeLists.txt", CUDA),
    ("some/where/kernel.cu", CUDA),
    ("ggml/src/ggml-cpu/ops.cpp", GGML), ("ggml/src/ggml-quants.c", GGML), ("ggml/include/ggml.h", GGML),
    ("src/llama-model.cpp", GGML), ("src/models/qwen3.cpp", GGML),
    ("common/arg.cpp", VERIFY_ONLY), ("tools/server/server.cpp", VERIFY_ONLY), ("docs/build.md", VERIFY_ONLY),
    ("src/llama-mmap.cpp", GGML), ("README.md", VERIFY_ONLY), ("ggml/docs/x.md", VERIFY_ONLY),
    ("tests/test-backend-ops.cpp", TESTS),
    ("CMakeLists.txt", OTHER), ("cmake/common.cmake", OTHER), ("Makefile", OTHER),
])
def test_each_file_class(path, rule):
    assert file_class(path) == rule


def test_rules_by_the_strongest_file_class():
    assert pin_needs("p", ["common/arg.cpp"]).kinds == ("verify",)
    assert pin_needs("p", ["tests/test-chat.cpp"]).kinds == ("verify",)
    assert pin_needs("p", ["tests/test-chat.cpp"]).rule == TESTS
    ggml = pin_needs("p", ["common/arg.cpp", "ggml/src/ggml-cpu/ops.cpp", "ggml/src/ggml-cpu/vec.h"])
    assert (ggml.kinds, ggml.rule, ggml.file, ggml.more) == (("verify", "kld"), GGML, "ggml/src/ggml-cpu/ops.cpp", 1)
    cuda = pin_needs("p", ["ggml/src/ggml-cpu/ops.cpp", "ggml/src/ggml-cuda/mmq.cuh"])
    assert cuda.kinds == ("verify", "gpu-verify", "kld", "bench") and cuda.rule == CUDA and cuda.on_device
    assert "verify, kld (ggml compute code: ggml/src/ggml-cpu/ops.cpp and 1 more)" == ggml.text()
    assert pin_needs("p", ["CMakeLists.txt", "common/arg.cpp"]).kinds == ("verify", "gpu-verify", "kld", "bench")


def test_unknown_touched_needs_every_kind_never_nothing():
    need = pin_needs("p", None)
    assert need.rule == UNKNOWN and need.kinds == ("verify", "gpu-verify", "kld", "bench")


def test_declared_evidence_replaces_the_rules():
    need = pin_needs("p", ["ggml/src/ggml-cpu/ops.cpp"], ["verify", "bench"])
    assert (need.kinds, need.rule, need.on_device) == (("verify", "bench"), DECLARED, False)
    # but not below a GPU verify for CUDA code (review2: a label cannot stand in for a device)
    need = pin_needs("p", ["ggml/src/ggml-cuda/mmq.cu"], ["verify", "kld"])
    assert (need.kinds, need.rule, need.on_device) == (("verify", "gpu-verify", "kld"), DECLARED, True)
    assert pin_needs("p", ["common/arg.cpp"], ["bench", "verify"]).kinds == ("verify", "bench")
    assert pin_needs("p", None, ["nonsense"]).rule == UNKNOWN   # an unknown kind read from a file is no override


# --- pins.yaml ---------------------------------------------------------------------------------
def write_pins(tmp_path: Path, evidence: str) -> Path:
    shutil.copytree(goldens.FIXTURES / "pins" / "patches" / "argsort-block-size", tmp_path / "p")
    path = tmp_path / "pins.yaml"
    path.write_text(f"builds: [\"pypi:llama-cpp-python==0.3.36\"]\npins:\n  - id: x\n    patches: p\n    unchecked: none\n    evidence: {evidence}\n")
    return path


def test_config_reads_evidence_in_rule_order(tmp_path):
    pinset = load_pinset(write_pins(tmp_path, "[kld, verify]"))
    assert pinset.pins[0].evidence == ("verify", "kld")


@pytest.mark.parametrize("value, key, message", [
    ("[]", "pins[0].evidence", "empty list"),
    ("[verify, speed]", "pins[0].evidence[1]", "unknown evidence kind 'speed' (kinds: verify, gpu-verify, kld, bench)"),
    ("[kld, kld]", "pins[0].evidence[1]", "'kld' given twice"),
    ("verify", "pins[0].evidence", "must be a list"),
])
def test_config_evidence_errors_name_line_and_key(tmp_path, value, key, message):
    with pytest.raises(ConfigError) as exc:
        load_pinset(write_pins(tmp_path, value))
    text = str(exc.value)
    assert ":6:" in text and key in text and message in text


def test_sim_json_keeps_the_declared_evidence():
    doc = json.loads((GREEN / "sim.json").read_text())
    doc["builds"][0]["pins"][0]["evidence"] = ["verify", "kld"]
    again = SimResult.from_json(Doc(doc, "sim.json", "")).to_json()
    assert again["builds"][0]["pins"][0]["evidence"] == ["verify", "kld"]
    assert "evidence" not in again["builds"][0]["pins"][1]


# --- the verdict -------------------------------------------------------------------------------
def scenario(tmp_path: Path, touched, evidence=None) -> list[Path]:
    """The green scenario's sim (every pin touching `touched`) and verify results, without kld and bench."""
    doc = json.loads((GREEN / "sim.json").read_text())
    for b in doc["builds"]:
        for p in b["pins"]:
            p["touched"] = touched
            if evidence:
                p["evidence"] = evidence
    sim = tmp_path / "sim.json"
    sim.write_text(json.dumps(doc))
    return [sim, *sorted(GREEN.glob("verify-*.json"))]


def report(tmp_path, files):
    out = tmp_path / "r.json"
    md = tmp_path / "r.md"
    rc = main(["report", *map(str, files), "--json", str(out), "--markdown", str(md)])
    return rc, run_doc(out.read_text()), md.read_text()


def test_common_only_pins_are_ready_on_sim_and_verify(tmp_path):
    rc, doc, md = report(tmp_path, scenario(tmp_path, ["common/arg.cpp"]))
    assert (rc, doc["outcome"]) == (0, "ready"), doc["verdict"]
    assert "- `cuda-mmq-iq1m`: verify (no compute code: common/arg.cpp)" in md
    assert "KLD vs CPU reference: not measured (no kld result; no pin's evidence rule asks for one)" in md


def test_ggml_pins_need_a_kld_not_a_bench(tmp_path):
    rc, doc, md = report(tmp_path, scenario(tmp_path, ["ggml/src/ggml-cpu/ops.cpp"]))
    assert rc == 1 and doc["verdict"]["missing"] == ["no kld result"]
    assert "- `cuda-mmq-iq1m`: verify, kld (ggml compute code: ggml/src/ggml-cpu/ops.cpp)" in md


def test_unknown_touched_needs_everything(tmp_path):
    rc, doc, md = report(tmp_path, scenario(tmp_path, None))
    assert rc == 1 and doc["verdict"]["missing"][0] == "no kld, bench result"
    assert "verify, gpu-verify, kld, bench (files unknown)" in md


def test_override_asks_for_more_than_the_rules(tmp_path):
    rc, doc, md = report(tmp_path, scenario(tmp_path, ["docs/x.md"], ["verify", "bench"]))
    assert rc == 1 and doc["verdict"]["missing"] == ["no bench result"]
    assert "verify, bench (pins.yaml evidence:)" in md


def test_no_sim_result_needs_every_kind(tmp_path):
    rc, doc, _ = report(tmp_path, sorted(GREEN.glob("verify-*.json")))
    assert rc == 1 and doc["verdict"]["missing"][0] == "no sim, kld, bench result"


def test_a_cuda_pin_touching_a_cmakelists_is_not_ready_on_cpu_evidence(tmp_path):
    """Trust III: `evidence: [verify]` on a pin changing CUDA code and a CMakeLists read "ready" on CPU verifies."""
    files = scenario(tmp_path, ["CMakeLists.txt", "ggml/src/ggml-cuda/mmq.cu"], ["verify"])[:1] + [GREEN / "verify-cpu.json"]
    rc, doc, md = report(tmp_path, files)
    assert rc == 1 and doc["outcome"] != "ready", doc["verdict"]
    assert any("changes CUDA code (ggml/src/ggml-cuda/mmq.cu)" in item and "GPU gates" in item
               for item in doc["verdict"]["missing"]), doc["verdict"]["missing"]
    assert "gpu-verify kept: changes CUDA code (ggml/src/ggml-cuda/mmq.cu)" in md
