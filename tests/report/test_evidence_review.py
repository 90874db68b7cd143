"""Second review of the evidence rules (pinset/sim/evidence.py) against real llama.cpp paths: build files
are never "no compute code", llama's own src/ code is compute code, an applied pin whose touched list is
empty is unknown (never "touches nothing"), and pins.yaml `evidence:` cannot take a GPU verify from a pin
that changes CUDA code."""

from __future__ import annotations

import pytest

from pinset.sim import evidence as ev


@pytest.mark.parametrize("path", ["src/CMakeLists.txt", "ggml/CMakeLists.txt", "ggml/src/CMakeLists.txt",
                                  "common/CMakeLists.txt", "ggml/cmake/common.cmake", "tools/server/CMakeLists.txt",
                                  "CMakeLists.txt", "Makefile"])
def test_build_files_need_every_kind(path):
    assert ev.file_class(path) == ev.OTHER, path
    assert ev.pin_needs("p", [path, "docs/build.md"]).kinds == ev.KINDS


@pytest.mark.parametrize("path", ["src/unicode.cpp", "src/llama-cparams.cpp", "src/llama-kv-cells.h",
                                  "src/llama-mmap.cpp", "src/llama-quant.cpp", "include/llama.h"])
def test_llama_library_code_is_compute_code(path):
    assert ev.file_class(path) == ev.GGML, path


@pytest.mark.parametrize("path,cls", [("ggml/src/ggml-cpu/ops.cpp", ev.GGML), ("ggml/src/ggml-quants.c", ev.GGML),
                                      ("ggml/include/ggml.h", ev.GGML), ("ggml/src/ggml-cuda/mmq.cuh", ev.CUDA),
                                      ("ggml/src/ggml-cuda/CMakeLists.txt", ev.CUDA), ("src/llama-graph.cpp", ev.GGML),
                                      ("src/llama-chat.cpp", ev.VERIFY_ONLY), ("common/arg.cpp", ev.VERIFY_ONLY),
                                      ("tests/test-chat.cpp", ev.TESTS), ("docs/build.md", ev.VERIFY_ONLY)])
def test_real_paths_keep_their_class(path, cls):
    assert ev.file_class(path) == cls


def test_an_applied_pin_with_no_touched_file_is_unknown():
    need = ev.pin_needs("p", [])
    assert need.kinds == ev.KINDS and need.rule == ev.UNKNOWN and need.on_device


@pytest.mark.parametrize("touched", [["ggml/src/ggml-cuda/mmq.cu"], None])
def test_evidence_override_cannot_drop_the_gpu_verify_of_cuda_code(touched):
    need = ev.pin_needs("p", touched, ["verify"])
    assert ev.GPU_VERIFY in need.kinds and ev.VERIFY in need.kinds and need.on_device
    assert need.rule == ev.DECLARED and "gpu-verify kept" in need.text()


def test_evidence_override_still_weakens_other_pins():
    assert ev.pin_needs("p", ["ggml/src/ggml-cpu/ops.cpp"], ["verify"]).kinds == (ev.VERIFY,)
    assert ev.pin_needs("p", ["CMakeLists.txt"], ["verify"]).kinds == (ev.VERIFY,)


def test_cpu_gate_scope_reads_an_empty_touched_as_unknown():
    from pinset.verify import plan

    ops, why = plan.cpu_gate_scope([["docs/x.md"], []], set())
    assert ops == list(plan.CPU_GATE_OPS) and "unknown" in why


def test_cpu_gate_scope_runs_the_matmuls_for_a_build_file():
    from pinset.verify import plan

    assert plan.cpu_gate_scope([["ggml/src/CMakeLists.txt"]], set())[0] == list(plan.CPU_GATE_OPS)


# --- Trust III: the GPU verify of a CUDA pin holds whatever else the pin touches ---------------------------
@pytest.mark.parametrize("other", [["CMakeLists.txt"], ["ggml/CMakeLists.txt", "cmake/x.cmake"], ["weird/file.bin"],
                                   ["common/arg.cpp", "Makefile"], ["tests/test-chat.cpp"]])
@pytest.mark.parametrize("declared", [["verify"], ["verify", "kld"], ["kld", "bench"], ["bench"]])
def test_a_cuda_pin_keeps_its_gpu_verify_whatever_else_it_touches(other, declared):
    need = ev.pin_needs("p", [*other, "ggml/src/ggml-cuda/mmq.cu"], declared)
    assert ev.GPU_VERIFY in need.kinds and ev.VERIFY in need.kinds and need.on_device, need
    assert set(declared) <= set(need.kinds)
    assert "changes CUDA code (ggml/src/ggml-cuda/mmq.cu)" in need.why()


def test_a_cuda_pin_with_a_build_file_is_decided_by_its_cuda_code():
    need = ev.pin_needs("p", ["CMakeLists.txt", "ggml/src/ggml-cuda/mmq.cu", "ggml/src/ggml-cuda/mmq.cuh"])
    assert (need.rule, need.file, need.more, need.kinds) == (ev.CUDA, "ggml/src/ggml-cuda/mmq.cu", 1, ev.KINDS)
    assert need.why() == "changes CUDA code (ggml/src/ggml-cuda/mmq.cu and 1 more)"
