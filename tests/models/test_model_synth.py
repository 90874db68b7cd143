"""`pinset model synth`: the GGUF writer (read back with gguf's reader) and the CLI checks."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from pinset.cli import main
from pinset.errors import PinsetError
from pinset.models.synth import preset, write_synthetic_gguf
from tests.testing.gguf import gguf, make_vocab, needs_gguf


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
    # beyond llama.cpp's own limits (src/llama-hparams.h): a file it would not load
    with pytest.raises(PinsetError, match="at most 512 layers"):
        preset("llama", "tiny", n_layer=513)
    with pytest.raises(PinsetError, match="at most 1024 experts"):
        preset("qwen3moe", "tiny", n_expert=1025)


# --- models written directly in the target quantization (no F16, no imatrix) -------------------------------

from hypothesis import (  # noqa: E402
    example,
    given,
    settings,
    strategies as st,  # noqa: E402
)

from pinset.models import blocks  # noqa: E402
from pinset.models.pipeline import SynthSettings, choose_method, synthesize  # noqa: E402
from pinset.models.synth import find_vocab, read_gguf_kv  # noqa: E402

LLAMA_BIN = os.environ.get("PINSET_TEST_LLAMA_BIN")


def dequantize(data, qtype: str) -> np.ndarray:
    """gguf-py's numpy dequantization (an implementation independent of ours) of raw blocks."""
    return gguf.quants.dequantize(np.asarray(data, dtype=np.uint8).reshape(-1),
                                  gguf.GGMLQuantizationType[qtype]).reshape(-1)


@needs_gguf
def test_block_layouts_are_ggmls():
    for qtype, size in blocks.BLOCK.items():
        assert gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[qtype]] == size


@needs_gguf
@settings(max_examples=25, deadline=None)
@given(qtype=st.sampled_from(blocks.TYPES), log_std=st.floats(0, 1), n_rows=st.integers(1, 40),
       seed=st.integers(0, 2**32 - 1))
@example(qtype="IQ1_S", log_std=0.0, n_rows=1, seed=34)   # a mean of 0.062 std (~2 standard errors): failed 0.05 std
def test_random_blocks_are_valid_and_dequantize_to_the_intended_std(qtype, log_std, n_rows, seed):
    lowest = 2.0**-14 * blocks.unit_rms(qtype) * 1.001  # d at fp16's smallest normal number
    std = lowest * (2.0 / lowest) ** log_std
    n = n_rows * 256 * 8
    raw = blocks.random_blocks(qtype, n, std, [seed], threads=2)
    per_block, nbytes = blocks.BLOCK[qtype]
    assert raw.shape == (n // per_block, nbytes) and raw.dtype == np.uint8
    w = dequantize(raw, qtype)
    assert w.size == n and np.all(np.isfinite(w))
    # 32 values share a (sub-block) scale, so the sample std's error shrinks with the number of such groups:
    # ~4 of its standard errors (measured over 60 seeds per type and size), never looser than 2 % at large n.
    # The sample mean's standard error is ~0.24 tol for every type and size (60 seeds each: 0.030 std for IQ1_S
    # at 2,048 values, 0.0046 at 81,920), so tol bounds it at ~4 of them too (a fixed 0.05 std was 1.7 of them
    # for IQ1_S at one row: hypothesis found seed 34 at 0.062)
    tol = max(0.02, (n / 32) ** -0.5)
    assert abs(w.std() / std - 1) < tol and abs(w.mean()) < tol * std
    d_expected = np.float16(std / blocks.unit_rms(qtype))
    if qtype in ("Q8_0", "Q4_0", "IQ1_S"):
        assert np.all(raw[:, :2].copy().view(np.float16) == d_expected)
    if qtype == "Q8_0":
        assert not np.any(raw[:, 2:].view(np.int8) == -128)       # codes -127..127 only: no bias
    if qtype == "Q4_0":
        assert not np.any((raw[:, 2:] & 0x0F) == 0) and not np.any((raw[:, 2:] >> 4) == 0)
    if qtype == "IQ1_S":
        qh = raw[:, 34:].copy().view(np.uint16)
        assert np.all((qh >> 12) & 7 >= 4)                            # sub-block scales 4..7
    if qtype == "IQ1_M":
        sc = raw[:, 48:].copy().view(np.uint16)
        d = (sc[:, 0] >> 12) | ((sc[:, 1] >> 8) & 0xF0) | ((sc[:, 2] >> 4) & 0xF00) | (sc[:, 3] & 0xF000)
        assert np.all(d.astype(np.uint16).view(np.float16) == d_expected)
        assert all(np.all((sc >> shift) & 7 >= 4) for shift in (0, 3, 6, 9))
    # the delta sign bits and grid indices are random: both delta signs occur
    if qtype.startswith("IQ1"):
        assert len(np.unique(np.round(w / float(d_expected), 4))) > 10


def test_blocks_follow_the_seed_not_the_thread_count():
    n = 256 * (blocks.CHUNK_BLOCKS + 7)  # more than one chunk
    one = blocks.random_blocks("IQ1_M", n, 0.02, [5, 1], threads=1)
    assert np.array_equal(one, blocks.random_blocks("IQ1_M", n, 0.02, [5, 1], threads=3))
    assert not np.array_equal(one, blocks.random_blocks("IQ1_M", n, 0.02, [6, 1], threads=1))


def test_a_scale_fp16_cannot_hold_is_refused():
    for std in (2.0**-14 * blocks.unit_rms("Q8_0") * 0.9, 1e7, float("nan")):
        with pytest.raises(ValueError, match="fp16"):
            blocks.random_blocks("Q8_0", 32, std, [0])
    with pytest.raises(ValueError, match="whole number"):
        blocks.random_blocks("IQ1_S", 100, 0.1, [0])


@needs_gguf
@pytest.mark.parametrize("quant,ftype", [("IQ1_M", 31), ("IQ1_S", 24), ("Q4_0", 2), ("Q8_0", 7)])
def test_direct_model_recipe_metadata_and_scales(tmp_path, quant, ftype):
    vocab = make_vocab(tmp_path / "vocab.gguf")
    shape = preset("qwen3moe", "tiny", n_layer=1, tie_embeddings=False)
    res = write_synthetic_gguf(shape, tmp_path / "m.gguf", vocab_path=vocab, seed=3, threads=2, quant=quant)
    r = gguf.GGUFReader(str(res.path))
    assert r.fields["general.file_type"].contents() == ftype
    assert r.fields["general.quantization_version"].contents() == gguf.GGML_QUANT_VERSION
    types = {t.name: t.tensor_type.name for t in r.tensors}
    expected = {n: ("F32" if "norm" in n or "gate_inp" in n else quant if "_exps" in n else "Q8_0") for n in types}
    assert types == expected
    assert res.tensor_types == {t: list(expected.values()).count(t) for t in set(expected.values())}
    t = {x.name: x for x in r.tensors}
    assert list(t["blk.0.ffn_down_exps.weight"].shape) == [256, 256, 8]  # ggml ne, as the F16 model's
    assert list(t["token_embd.weight"].shape) == [256, 300]
    # every matrix dequantizes to finite weights with the F16 recipe's standard deviation
    f16 = write_synthetic_gguf(shape, tmp_path / "f16.gguf", vocab_path=vocab, seed=3, threads=2)
    f16_std = {x.name: float(np.asarray(x.data, dtype=np.float32).std())
               for x in gguf.GGUFReader(str(f16.path)).tensors}
    for name, x in t.items():
        w = (np.asarray(x.data, dtype=np.float32).reshape(-1) if types[name] == "F32"
             else dequantize(x.data, types[name]))
        assert w.size == int(np.prod(x.shape)) and np.all(np.isfinite(w)), name
        assert abs(w.std() - f16_std[name]) <= 0.05 * f16_std[name] + 1e-6, name
    assert np.all(np.asarray(t["blk.0.attn_norm.weight"].data) == 1.0)


@needs_gguf
def test_direct_same_seed_same_bytes(tmp_path):
    vocab = make_vocab(tmp_path / "vocab.gguf")
    shape = preset("llama", "tiny")
    a = write_synthetic_gguf(shape, tmp_path / "a.gguf", vocab_path=vocab, seed=1, threads=1, quant="IQ1_S")
    b = write_synthetic_gguf(shape, tmp_path / "b.gguf", vocab_path=vocab, seed=1, threads=2, quant="IQ1_S")
    c = write_synthetic_gguf(shape, tmp_path / "c.gguf", vocab_path=vocab, seed=2, threads=1, quant="IQ1_S")
    assert a.path.read_bytes() == b.path.read_bytes() != c.path.read_bytes()
    assert a.recipe == {"ffn_gate, ffn_up, ffn_down": "IQ1_S",
                        "token_embd, output, attn_q, attn_k, attn_v, attn_output": "Q8_0", "norms": "F32"}


@needs_gguf
def test_direct_refuses_rows_that_are_not_whole_blocks_and_leaves_no_file(tmp_path):
    vocab = make_vocab(tmp_path / "vocab.gguf")
    shape = preset("qwen3moe", "tiny", expert_ff=200)
    with pytest.raises(PinsetError, match="blk.0.ffn_down_exps.weight: rows of 200 weights are not whole IQ1_M"):
        write_synthetic_gguf(shape, tmp_path / "m.gguf", vocab_path=vocab, quant="IQ1_M")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vocab.gguf"]
    with pytest.raises(PinsetError, match="not written directly"):
        write_synthetic_gguf(preset("qwen3moe", "tiny"), tmp_path / "m.gguf", vocab_path=vocab, quant="Q4_K_M")


def test_auto_writes_full_size_models_directly_and_small_ones_through_llama_quantize():
    full = preset("qwen3moe", "a3b")
    assert (full.n_layer, full.n_expert, full.n_expert_used, full.expert_ff, full.n_embd) == (48, 128, 8, 768, 2048)
    assert 2 * full.layer_params() > 50e9  # the F16 intermediate we avoid: ~60 GB
    assert choose_method("auto", "IQ1_M", full) == "direct"
    assert choose_method("auto", "iq1_s", full) == "direct"
    assert choose_method("auto", "Q4_K_M", full) == "quantize"   # not a direct type: llama-quantize makes it
    assert choose_method("auto", "IQ1_M", preset("qwen3moe", "a3b-4l")) == "quantize"
    assert choose_method("auto", "IQ1_M", preset("qwen3moe", "a3b", n_layer=4)) == "quantize"
    assert choose_method("direct", "IQ1_M", preset("qwen3moe", "tiny")) == "direct"
    assert choose_method("quantize", "IQ1_M", full) == "quantize"
    with pytest.raises(PinsetError, match="not written directly"):
        choose_method("direct", "Q4_K_M", full)


@needs_gguf
def test_cli_direct_needs_no_build_and_records_the_recipe(tmp_path):
    import json

    vocab = make_vocab(tmp_path / "vocab.gguf")
    out = tmp_path / "out"
    argv = ["model", "synth", "--arch", "qwen3moe", "--size", "tiny", "--quant", "IQ1_S", "--direct",
            "--vocab", str(vocab), "-o", str(out), "-t", "2", "--json", str(tmp_path / "m.json")]
    assert main(argv) == 0
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["method"] == "direct" and doc["imatrix"] is None and doc["f16"] is None
    assert doc["direct"]["recipe"]["ffn_gate_exps, ffn_up_exps, ffn_down_exps"] == "IQ1_S"
    assert doc["direct"]["tensor_types"]["IQ1_S"] == 6 and "write_direct" in doc["seconds"]
    assert sorted(p.name for p in out.iterdir()) == ["synth-qwen3moe-tiny-IQ1_S.gguf", "synth-qwen3moe-tiny-IQ1_S.json"]
    first = (out / "synth-qwen3moe-tiny-IQ1_S.gguf").read_bytes()
    assert main(argv) == 0  # same recipe: reused
    assert json.loads((tmp_path / "m.json").read_text())["seconds"] == {"cached": True}
    assert main(argv + ["--seed", "1"]) == 0  # another recipe: rewritten
    assert (out / "synth-qwen3moe-tiny-IQ1_S.gguf").read_bytes() != first
    # the quantize method without a build is a usage error, as before; --other-quant is direct's only
    assert main(["model", "synth", "--arch", "qwen3moe", "--size", "tiny", "--method", "quantize",
                 "--vocab", str(vocab), "-o", str(out)]) == 2
    assert main(argv[:argv.index("--direct")] + argv[argv.index("--direct") + 1:] + ["--other-quant", "F16"]) == 2
    assert main(argv + ["--other-quant", "F16", "--name", "f16rest"]) == 0
    assert json.loads((tmp_path / "m.json").read_text())["direct"]["tensor_types"] == {"F16": 9, "F32": 11, "IQ1_S": 6}


needs_llama = pytest.mark.skipif(not LLAMA_BIN or gguf is None or not os.environ.get("PINSET_LLAMA_TREE"),
                                 reason="PINSET_TEST_LLAMA_BIN/PINSET_LLAMA_TREE not set: no llama.cpp programs "
                                        "and vocab files (eval scripts/build_test_tools.py)")


def _perplexity(model: Path, tmp_path: Path) -> tuple[float, int]:
    """(final PPL, n_vocab) of llama-perplexity on the CPU over pinset's prose."""
    from pinset import runner
    from pinset.measures.kld import run_until_whole
    from pinset.models.pipeline import DEFAULT_TEXT

    # run as pinset runs it: again when llama.cpp's log thread lost the final estimate at exit
    done, out, _ = run_until_whole(lambda: runner.run([Path(LLAMA_BIN) / "llama-perplexity", "-m", model, "-f", DEFAULT_TEXT,
                                                       "-c", "128", "--chunks", "3", "-t", "2"],
                                                      timeout=600, log=tmp_path / "ppl.log"), reference=True)
    assert done.ok and out.final_ppl is not None, (tmp_path / "ppl.log").read_text()[-3000:]
    n_vocab = len(gguf.GGUFReader(str(model)).fields["tokenizer.ggml.tokens"].contents())
    return out.final_ppl.value, n_vocab


@pytest.mark.slow
@needs_llama
@pytest.mark.parametrize("arch,quant,layers", [("qwen3moe", "IQ1_M", 2), ("qwen3moe", "IQ1_S", 2),
                                               ("qwen3moe", "IQ1_M", 48), ("llama", "IQ1_S", 2)])
def test_direct_models_run_in_llama_cpp_with_sane_logits(tmp_path, arch, quant, layers):
    """llama-perplexity loads the file and computes finite logits. With the final RMS norm and output
    std 3/sqrt(n_embd), logits are ~N(0, 9) whatever the token, so ln PPL ~ ln(n_vocab) + 9/2: a NaN,
    overflow or a broken scale anywhere in the 48 layers shows up as far off (or no) PPL."""
    model = synthesize(SynthSettings(preset(arch, "tiny", n_layer=layers), quant, method="direct", threads=2), tmp_path,
                       None, trees=[os.environ["PINSET_LLAMA_TREE"]]).path
    ppl, n_vocab = _perplexity(model, tmp_path)
    assert np.isfinite(ppl)
    assert abs(np.log(ppl) - (np.log(n_vocab) + 4.5)) < 1.5, ppl


@pytest.mark.slow
@needs_llama
def test_llama_bench_runs_a_direct_model(tmp_path):
    from pinset import runner
    from pinset.measures.llama_bench import parse_jsonl

    model = synthesize(SynthSettings(preset("qwen3moe", "tiny"), "IQ1_M", method="direct", threads=2), tmp_path, None,
                       trees=[os.environ["PINSET_LLAMA_TREE"]]).path
    done = runner.run([Path(LLAMA_BIN) / "llama-bench", "-m", model, "-p", "64", "-n", "8", "-r", "2", "-t", "2",
                       "-o", "jsonl"], timeout=600, log=tmp_path / "bench.log")
    assert done.ok, done.describe()
    lines = parse_jsonl(done.stdout)
    assert [x.test for x in lines] == ["pp64", "tg8"]
    assert all(np.isfinite(x.avg_ts) and x.avg_ts > 0 for x in lines)
    assert lines[0].model_type.endswith("IQ1_M - 1.75 bpw")


@pytest.mark.slow
@needs_llama
def test_kld_runs_on_a_direct_model_without_any_f16(tmp_path):
    """KLD compares two runs on the same file: a directly written model is all it needs."""
    import json

    model = synthesize(SynthSettings(preset("qwen3moe", "tiny"), "IQ1_S", method="direct", threads=2), tmp_path, None,
                       trees=[os.environ["PINSET_LLAMA_TREE"]]).path
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".gguf", ".json"]
    argv = ["kld", "--base-bin", LLAMA_BIN, "--head-bin", LLAMA_BIN, "--cpu", "-m", str(model), "--ctx", "256",
            "--chunks", "2", "-t", "2", "--cache", str(tmp_path / "cache"), "--json", str(tmp_path / "kld.json")]
    assert main(argv) == 0
    doc = json.loads((tmp_path / "kld.json").read_text())
    assert all(r["ok"] for r in doc["runs"]) and np.isfinite(doc["runs"][1]["kld"]["mean"])


def _decoded(value):
    if isinstance(value, list):
        return [_decoded(v) for v in value]
    return value.decode() if isinstance(value, bytes) else value


@needs_gguf
@pytest.mark.parametrize("vocab", ["made", "llama-spm", pytest.param("qwen2", marks=pytest.mark.slow),
                                   pytest.param("llama-bpe", marks=pytest.mark.slow)])  # GGUFReader: ~40 s each
def test_tokenizer_keys_read_from_the_header_equal_ggufs_reader(tmp_path, vocab):
    """Our header reader (fast) against gguf's GGUFReader (slow) on the vocab files the presets use."""
    if vocab == "made":
        path = make_vocab(tmp_path / "vocab.gguf")
    elif os.environ.get("PINSET_LLAMA_TREE"):
        path = find_vocab(vocab, [os.environ["PINSET_LLAMA_TREE"]])
    else:
        pytest.skip("PINSET_LLAMA_TREE not set: no llama.cpp vocab files")
    ours = read_gguf_kv(path, "tokenizer.")
    theirs = {k: f for k, f in gguf.GGUFReader(str(path)).fields.items() if k.startswith("tokenizer.")}
    assert [k for k, *_ in ours] == list(theirs)
    for key, value, vtype, sub_type in ours:
        field = theirs[key]
        assert vtype == field.types[0] and (sub_type is None or sub_type == field.types[-1]), key
        want, got = field.contents(), _decoded(value)
        if isinstance(want, list) and want and isinstance(want[0], float):
            assert np.allclose(got, want), key
        else:
            assert got == want, key


def test_a_file_that_is_not_gguf_is_one_clear_error(tmp_path):
    bad = tmp_path / "vocab.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 8 + b"\x05")  # header cut short
    with pytest.raises(PinsetError, match="vocab.gguf: not a readable GGUF file"):
        read_gguf_kv(bad, "tokenizer.")
    bad.write_bytes(b"PK\x03\x04" + b"\x00" * 40)
    with pytest.raises(PinsetError, match="not a readable GGUF file"):
        read_gguf_kv(bad, "tokenizer.")


@needs_gguf
@pytest.mark.parametrize("arch, size, quant, other, overrides", [
    ("qwen3moe", "tiny", "IQ1_M", "Q8_0", {}),
    ("qwen3moe", "tiny", "Q4_0", "F16", {"layers": 3}),
    ("qwen3moe", "tiny", "F16", "Q8_0", {"tie_embeddings": False}),
    ("llama", "tiny", "IQ1_S", "Q8_0", {"n_ff": 768}),
    ("llama", "tiny", "Q8_0", "Q8_0", {"tie_embeddings": False, "n_embd": 512, "head_dim": 32}),
])
def test_the_size_check_counts_exactly_the_tensor_bytes_written(tmp_path, arch, size, quant, other, overrides):
    from pinset.models.synth import model_bytes

    overrides = {("n_layer" if k == "layers" else k): v for k, v in overrides.items()}
    vocab = make_vocab(tmp_path / "vocab.gguf")
    shape = preset(arch, size, **overrides)
    result = write_synthetic_gguf(shape, tmp_path / "m.gguf", vocab_path=vocab, quant=quant, other_quant=other)
    written = sum(int(t.n_bytes) for t in gguf.GGUFReader(str(result.path)).tensors)
    assert model_bytes(shape, result.n_vocab, quant, other) == written


@needs_gguf
def test_a_model_larger_than_the_free_space_is_bad_input_before_anything_is_written(tmp_path, capsys):
    vocab = make_vocab(tmp_path / "vocab.gguf")
    out = tmp_path / "out"
    capsys.readouterr()
    rc = main(["model", "synth", "--arch", "qwen3moe", "--size", "tiny", "--quant", "IQ1_M", "--direct",
               "--layers", "512", "--embd", "1048576", "--experts", "1024", "--expert-ff", "65536",
               "--vocab", str(vocab), "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "GB free" in err and len(err.strip().splitlines()) == 1
    assert not out.exists() or not any(out.iterdir())


@needs_gguf
def test_a_model_already_there_counts_as_room(tmp_path, capsys, monkeypatch):
    """The same synth run again (a nightly step) on a disk that has filled up since: the model in -o is reused,
    it is no bad input for want of the room it already takes."""
    import shutil
    from collections import namedtuple

    vocab = make_vocab(tmp_path / "vocab.gguf")
    out = tmp_path / "out"
    argv = ["model", "synth", "--arch", "qwen3moe", "--size", "tiny", "--quant", "IQ1_M", "--direct",
            "--vocab", str(vocab), "-o", str(out)]
    assert main(argv) == 0
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**12, 10**12, 0))   # the disk is full now
    capsys.readouterr()
    assert main(argv) == 0, capsys.readouterr().err
    assert "cached" in capsys.readouterr().out
