"""kld verdict and document from real captured llama-perplexity output; end-to-end on a real CPU build (slow)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pinset.measures.kld import DeviceRun, Reference, kld_document, verdict
from pinset.measures.perplexity import kld_problem, parse_perplexity
from pinset.measures.sides import Side
from tests.testing import FIXTURES

FIX = FIXTURES / "perplexity"


def _run(label: str, fixture: str, rc: int = 0) -> DeviceRun:
    out = parse_perplexity((FIX / f"{fixture}.stdout").read_text(), (FIX / f"{fixture}.stderr").read_text())
    side = Side(label, "b1", "0c1e57098" + "0" * 31, Path("/nonexistent"), None)
    return DeviceRun(label, side, "CPU", out, rc, kld_problem(out, rc), 1.0)


def _shifted(run: DeviceRun, delta: float) -> DeviceRun:
    from dataclasses import replace

    k = run.output.kld
    k2 = replace(k, kld_mean=replace(k.kld_mean, value=k.kld_mean.value + delta))
    return replace(run, label="head", output=replace(run.output, kld=k2))


def test_same_kld_is_as_close_as_base():
    base = _run("base", "kld-iq1m-vs-f16")
    v = verdict(base, _shifted(base, 0.0))
    assert v.text == "as close to the CPU result as base"
    assert v.sigma == pytest.approx(2 ** 0.5 * 0.067744)


def test_head_further_by_more_than_two_sigma():
    base = _run("base", "kld-iq1m-vs-f16")
    assert verdict(base, _shifted(base, 0.2)).text == "further from the CPU result than base"
    assert verdict(base, _shifted(base, 0.05)).text == "as close to the CPU result as base"
    assert verdict(base, _shifted(base, -0.2)).text == "closer to the CPU result than base"


def test_failed_kld_step_with_exit_0_is_a_failed_run(tmp_path):
    base = _run("base", "kld-iq1m-vs-f16")
    head = _run("head", "kld-bad-base-file")
    assert head.returncode == 0 and not head.ok
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    text = tmp_path / "t.txt"
    text.write_text("x")
    ref = Reference(tmp_path / "logits.bin", parse_perplexity("", ""), True, "k", "b1", "c")
    doc = kld_document(model, text, 256, 3, ref, [base, head])
    assert doc["ok"] is False and doc["kind"] == "kld" and doc["schema"] == 1
    assert doc["verdict"]["sigma"] is None
    h = doc["runs"][1]
    assert h["ok"] is False and "does not look like" in h["detail"]
    b = doc["runs"][0]
    assert b["kld"]["mean"] == 3.544505 and b["kld"]["p99_9"] == 8.729576 and b["same_top_p"]["value"] == 20.997


LLAMA_BIN = os.environ.get("PINSET_TEST_LLAMA_BIN")
needs_bin = pytest.mark.skipif(
    not LLAMA_BIN, reason="PINSET_TEST_LLAMA_BIN is not set: no llama.cpp build (llama-perplexity, llama-bench, "
                          "llama-imatrix, llama-quantize) to run end to end")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from pinset.build.programs import LlamaBin
    from pinset.models.pipeline import SynthSettings, synthesize
    from pinset.models.synth import preset

    out = tmp_path_factory.mktemp("model")
    return synthesize(SynthSettings(preset("qwen3moe", "tiny"), "IQ1_M", name="tiny", imatrix_chunks=2, imatrix_ctx=256,
                                    threads=2), out, LlamaBin(Path(LLAMA_BIN))).path


@pytest.mark.slow
@needs_bin
def test_kld_end_to_end_on_cpu(tiny_model, tmp_path):
    from pinset.cli import main

    argv = ["kld", "--base-bin", LLAMA_BIN, "--head-bin", LLAMA_BIN, "--cpu", "-m", str(tiny_model),
            "--ctx", "256", "--chunks", "2", "-t", "2", "--cache", str(tmp_path / "cache"),
            "--json", str(tmp_path / "kld.json"), "--markdown", str(tmp_path / "kld.md")]
    assert main(argv) == 0
    doc = json.loads((tmp_path / "kld.json").read_text())
    assert doc["reference"]["cached"] is False
    assert [r["label"] for r in doc["runs"]] == ["base", "head"] and all(r["ok"] for r in doc["runs"])
    assert doc["verdict"]["text"] == "as close to the CPU result as base"
    assert doc["runs"][0]["kld"]["mean"] < 1e-3  # the same CPU path as the reference
    assert main(argv) == 0
    assert json.loads((tmp_path / "kld.json").read_text())["reference"]["cached"] is True
    assert "KL divergence vs CPU" in (tmp_path / "kld.md").read_text()
