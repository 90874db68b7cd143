"""`pinset model synth`: the GGUF writer (read back with gguf's reader) and the CLI checks."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from pinset.cli import main
from pinset.errors import PinsetError, ToolchainError
from pinset.models.gguf_module import import_gguf
from pinset.models.synth import preset, write_synthetic_gguf

try:
    gguf = import_gguf([os.environ.get("PINSET_TEST_LLAMA_BIN")])
except ToolchainError:
    gguf = None
needs_gguf = pytest.mark.skipif(gguf is None, reason="no `gguf` package and no llama.cpp tree (PINSET_LLAMA_TREE) "
                                                      "with gguf-py: cannot write or read GGUF files")


def make_vocab(path: Path, n: int = 300) -> Path:
    """A small real tokenizer GGUF (byte-level gpt2 style) so the test needs no llama.cpp tree."""
    w = gguf.GGUFWriter(str(path), "llama")
    tokens = [f"<{i}>" for i in range(n)]
    w.add_key_value("tokenizer.ggml.model", "gpt2", gguf.GGUFValueType.STRING)
    w.add_key_value("tokenizer.ggml.pre", "default", gguf.GGUFValueType.STRING)
    w.add_key_value("tokenizer.ggml.tokens", tokens, gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.STRING)
    w.add_key_value("tokenizer.ggml.token_type", [1] * n, gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)
    w.add_key_value("tokenizer.ggml.merges", ["< 1", "<1 >"], gguf.GGUFValueType.ARRAY,
                    sub_type=gguf.GGUFValueType.STRING)
    w.add_key_value("tokenizer.ggml.bos_token_id", 1, gguf.GGUFValueType.UINT32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    return path


@needs_gguf
def test_qwen3moe_tensors_and_metadata(tmp_path):
    vocab = make_vocab(tmp_path / "vocab.gguf")
    shape = preset("qwen3moe", "tiny", n_layer=1, tie_embeddings=False)
    res = write_synthetic_gguf(shape, tmp_path / "m.gguf", vocab_path=vocab, seed=3, threads=2)
    r = gguf.GGUFReader(str(res.path))
    f = {k: v.contents() for k, v in r.fields.items() if not k.startswith("GGUF.")}
    assert f["general.architecture"] == "qwen3moe"
    assert f["qwen3moe.expert_count"] == 8 and f["qwen3moe.expert_used_count"] == 2
    assert f["qwen3moe.expert_feed_forward_length"] == 256 and f["qwen3moe.attention.key_length"] == 64
    assert f["tokenizer.ggml.tokens"][:2] == ["<0>", "<1>"] and f["tokenizer.ggml.model"] == "gpt2"
    t = {x.name: x for x in r.tensors}
    assert set(t) == {"token_embd.weight", "output_norm.weight", "output.weight", "blk.0.attn_norm.weight",
                      "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight",
                      "blk.0.attn_q_norm.weight", "blk.0.attn_k_norm.weight", "blk.0.ffn_norm.weight",
                      "blk.0.ffn_gate_inp.weight", "blk.0.ffn_gate_exps.weight", "blk.0.ffn_down_exps.weight",
                      "blk.0.ffn_up_exps.weight"}
    # ggml order (ne0 first): experts are {n_embd, n_ff_exp, n_expert}, down is {n_ff_exp, n_embd, n_expert}
    assert list(t["blk.0.ffn_gate_exps.weight"].shape) == [256, 256, 8]
    assert list(t["blk.0.attn_k.weight"].shape) == [256, 128]
    assert list(t["token_embd.weight"].shape) == [256, 300]
    emb = np.asarray(t["token_embd.weight"].data, dtype=np.float32)
    assert 0.9 < emb.std() < 1.1  # untied embedding ~ N(0, 1)
    assert np.all(np.asarray(t["blk.0.attn_norm.weight"].data) == 1.0)
    assert res.n_params == sum(int(np.prod(x.shape)) for x in r.tensors)
    # same seed, same bytes
    again = write_synthetic_gguf(shape, tmp_path / "m2.gguf", vocab_path=vocab, seed=3, threads=1)
    assert again.path.read_bytes() == res.path.read_bytes()


@needs_gguf
def test_dense_llama_has_no_experts_and_ties_embeddings(tmp_path):
    vocab = make_vocab(tmp_path / "vocab.gguf")
    res = write_synthetic_gguf(preset("llama", "tiny"), tmp_path / "d.gguf", vocab_path=vocab, threads=2)
    r = gguf.GGUFReader(str(res.path))
    names = {x.name for x in r.tensors}
    assert "output.weight" not in names and "blk.1.ffn_gate.weight" in names
    assert not any("exps" in n for n in names)
    assert r.fields["llama.vocab_size"].contents() == 300


def test_unknown_size_and_bad_shape_are_usage_errors():
    with pytest.raises(PinsetError, match="not a known"):
        preset("llama", "enormous")
    with pytest.raises(PinsetError, match="multiple"):
        preset("llama", "tiny", n_head=5)
    assert main(["model", "synth", "--arch", "llama", "--size", "tiny", "-o", "/tmp/x"]) == 2
