"""Write a random-weight GGUF (F16, or directly quantized) with real tensor names and metadata for an architecture.

Why random weights: KLD and speed comparisons between two builds of the same kernels need a model
of the right *shape* (expert count, hidden size, quant type), not a trained one, and a synthetic model
runs on any machine with no download. The vocabulary is copied from a real tokenizer GGUF that ships
in the llama.cpp tree (models/ggml-vocab-*.gguf) so tokenization of real text works.

Weights are scaled so that activations stay O(1) through the layers and the logits have a standard
deviation of about 3: the output distribution is peaked enough that quantization error shows up in KLD.

Written directly quantized (quant != "F16", see blocks.py) the same tensors get random valid blocks
with the same standard deviations, in a recipe close to llama-quantize's for the low-bit types: the FFN
weights (expert tensors ffn_{gate,up,down}_exps, or a dense model's ffn_{gate,up,down}) in the target
type, the other matrices (token_embd, output, attention) in `other_quant` (Q8_0 by default: llama-quantize
keeps them at higher precision too), and norms and the MoE router (ffn_gate_inp) in F32 as llama-quantize
always leaves them.
"""

from __future__ import annotations

import math
import mmap
import os
import re
import shutil
import struct
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from pinset.errors import PinsetError, RuntimeFailure
from pinset.models import blocks
from pinset.models.gguf_module import candidate_trees, import_gguf

ARCHS = ("qwen3moe", "llama")
# Types the writer makes without llama-quantize: F16 (the imatrix path's input) and blocks.TYPES.
DIRECT_QUANTS = ("F16", *blocks.TYPES)
OTHER_QUANTS = ("Q8_0", "F16")
_FFN_WEIGHT = re.compile(r"\.ffn_(gate|up|down)(_exps)?\.weight$")


@dataclass(frozen=True)
class Shape:
    arch: str
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int = 0              # dense FFN width (llama); for qwen3moe the nominal feed_forward_length
    n_expert: int = 0
    n_expert_used: int = 0
    expert_ff: int = 0
    vocab: str = "qwen2"       # models/ggml-vocab-<vocab>.gguf, or a path to any tokenizer GGUF
    tie_embeddings: bool = False
    ctx_train: int = 32768
    rope_freq_base: float = 1_000_000.0
    rms_eps: float = 1e-6

    def layer_params(self) -> int:
        """Weights in the repeating layers (no embeddings): what makes a full-depth model big."""
        attn = 2 * self.n_embd * (self.n_head + self.n_head_kv) * self.head_dim
        ffn = 3 * self.n_embd * (self.n_expert * self.expert_ff if self.n_expert else self.n_ff)
        return self.n_layer * (attn + ffn + self.n_expert * self.n_embd)

    def describe(self) -> str:
        moe = f", {self.n_expert} experts ({self.n_expert_used} used, ff {self.expert_ff})" if self.n_expert else f", ff {self.n_ff}"
        return (f"{self.arch}: {self.n_layer} layers, embd {self.n_embd}, heads {self.n_head}/{self.n_head_kv}"
                f" x {self.head_dim}{moe}, vocab {self.vocab}")


# Named sizes. "a3b" is Qwen3-30B-A3B's shape (its GGUF metadata: 48 layers, 128 experts, 8 used); "a3b-4l"
# the same layer shape cut to 4 layers (the IQ1_M MMQ anchor model);
# "1b-4l" is Llama-3.2-1B's layer shape cut to 4 layers; "tiny" ones are for CPU tests (rows of 256 so
# every k-quant and IQ1 type applies).
PRESETS: dict[tuple[str, str], Shape] = {
    ("qwen3moe", "a3b"): Shape("qwen3moe", n_layer=48, n_embd=2048, n_head=32, n_head_kv=4, head_dim=128,
                               n_ff=6144, n_expert=128, n_expert_used=8, expert_ff=768, vocab="qwen2",
                               ctx_train=40960),
    ("qwen3moe", "a3b-4l"): Shape("qwen3moe", n_layer=4, n_embd=2048, n_head=32, n_head_kv=4, head_dim=128,
                                  n_ff=6144, n_expert=128, n_expert_used=8, expert_ff=768, vocab="qwen2",
                                  ctx_train=40960),
    ("qwen3moe", "tiny"): Shape("qwen3moe", n_layer=2, n_embd=256, n_head=4, n_head_kv=2, head_dim=64,
                                n_ff=512, n_expert=8, n_expert_used=2, expert_ff=256, vocab="llama-spm",
                                tie_embeddings=True, ctx_train=4096),
    ("llama", "1b-4l"): Shape("llama", n_layer=4, n_embd=2048, n_head=32, n_head_kv=8, head_dim=64, n_ff=8192,
                              vocab="llama-bpe", tie_embeddings=True, ctx_train=131072, rope_freq_base=500000.0,
                              rms_eps=1e-5),
    ("llama", "tiny"): Shape("llama", n_layer=2, n_embd=256, n_head=4, n_head_kv=2, head_dim=64, n_ff=512,
                             vocab="llama-spm", tie_embeddings=True, ctx_train=4096, rope_freq_base=10000.0,
                             rms_eps=1e-5),
}


def preset(arch: str, size: str, **overrides) -> Shape:
    if arch not in ARCHS:
        raise PinsetError(f"--arch: {arch!r} is not one of {', '.join(ARCHS)}")
    key = (arch, size)
    if key not in PRESETS:
        sizes = ", ".join(s for a, s in PRESETS if a == arch)
        raise PinsetError(f"--size: {size!r} is not a known {arch} size ({sizes})")
    shape = replace(PRESETS[key], **{k: v for k, v in overrides.items() if v is not None})
    _check_shape(shape)
    return shape


# llama.cpp's own limits (src/llama-hparams.h): a model beyond them does not load (more experts: an abort)
LLAMA_MAX_LAYERS = 512
LLAMA_MAX_EXPERTS = 1024


def _check_shape(s: Shape) -> None:
    if s.n_layer > LLAMA_MAX_LAYERS:
        raise PinsetError(f"--layers {s.n_layer}: llama.cpp loads at most {LLAMA_MAX_LAYERS} layers")
    if s.n_expert > LLAMA_MAX_EXPERTS:
        raise PinsetError(f"--experts {s.n_expert}: llama.cpp loads at most {LLAMA_MAX_EXPERTS} experts")
    if s.arch == "qwen3moe" and (s.n_expert <= 0 or not 0 < s.n_expert_used <= s.n_expert or s.expert_ff <= 0):
        raise PinsetError("qwen3moe needs experts: n_expert > 0, 0 < n_expert_used <= n_expert, expert_ff > 0")
    if s.arch == "llama" and s.n_ff <= 0:
        raise PinsetError("llama needs n_ff > 0")
    if s.n_head % s.n_head_kv:
        raise PinsetError(f"n_head {s.n_head} is not a multiple of n_head_kv {s.n_head_kv}")


def find_vocab(vocab: str, trees: Sequence[Path | str | None] = ()) -> Path:
    """A tokenizer GGUF: a path, or models/ggml-vocab-<name>.gguf of a llama.cpp tree."""
    as_path = Path(vocab).expanduser()
    if as_path.suffix == ".gguf" or os.sep in vocab:
        if not as_path.is_file():
            raise PinsetError(f"vocab file {vocab} does not exist")
        return as_path
    for tree in candidate_trees(list(trees)):
        cand = tree / "models" / f"ggml-vocab-{vocab}.gguf"
        if cand.is_file():
            return cand
    raise PinsetError(f"no models/ggml-vocab-{vocab}.gguf found: give --llama-tree (a llama.cpp source tree)"
                      " or --vocab PATH.gguf")


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]  # numpy order (slowest first): the reverse of ggml's ne
    dtype: type
    std: float              # 0 means all ones (norm weights)


def tensor_specs(s: Shape, n_vocab: int, names) -> list[TensorSpec]:
    """Tensor list in llama.cpp's names, in the order convert_hf_to_gguf writes them."""
    f16, f32 = np.float16, np.float32
    e = s.n_embd
    out_std = 3.0 / math.sqrt(e)  # logits ~ N(0, 3^2) after the final RMS norm
    specs = [TensorSpec(names("token_embd"), (n_vocab, e), f16, out_std if s.tie_embeddings else 1.0)]
    for i in range(s.n_layer):
        q, kv = s.n_head * s.head_dim, s.n_head_kv * s.head_dim
        specs += [
            TensorSpec(names("attn_norm", i), (e,), f32, 0.0),
            TensorSpec(names("attn_q", i), (q, e), f16, 1 / math.sqrt(e)),
            TensorSpec(names("attn_k", i), (kv, e), f16, 1 / math.sqrt(e)),
            TensorSpec(names("attn_v", i), (kv, e), f16, 1 / math.sqrt(e)),
            TensorSpec(names("attn_output", i), (e, q), f16, 1 / math.sqrt(q)),
        ]
        if s.arch == "qwen3moe":
            specs += [
                TensorSpec(names("attn_q_norm", i), (s.head_dim,), f32, 0.0),
                TensorSpec(names("attn_k_norm", i), (s.head_dim,), f32, 0.0),
            ]
        specs.append(TensorSpec(names("ffn_norm", i), (e,), f32, 0.0))
        if s.n_expert:
            x, f = s.n_expert, s.expert_ff
            specs += [
                TensorSpec(names("ffn_gate_inp", i), (x, e), f32, 2 / math.sqrt(e)),
                TensorSpec(names("ffn_gate_exps", i), (x, f, e), f16, 1 / math.sqrt(e)),
                TensorSpec(names("ffn_down_exps", i), (x, e, f), f16, 1 / math.sqrt(f)),
                TensorSpec(names("ffn_up_exps", i), (x, f, e), f16, 1 / math.sqrt(e)),
            ]
        else:
            specs += [
                TensorSpec(names("ffn_gate", i), (s.n_ff, e), f16, 1 / math.sqrt(e)),
                TensorSpec(names("ffn_down", i), (e, s.n_ff), f16, 1 / math.sqrt(s.n_ff)),
                TensorSpec(names("ffn_up", i), (s.n_ff, e), f16, 1 / math.sqrt(e)),
            ]
    specs.append(TensorSpec(names("output_norm"), (e,), f32, 0.0))
    if not s.tie_embeddings:
        specs.append(TensorSpec(names("output"), (n_vocab, e), f16, out_std))
    return specs


def _name_lookup(gguf):
    """Tensor names from gguf's own tables (the names llama.cpp loads), keyed by our short names."""
    T = gguf.MODEL_TENSOR
    table = {
        "token_embd": T.TOKEN_EMBD, "output_norm": T.OUTPUT_NORM, "output": T.OUTPUT,
        "attn_norm": T.ATTN_NORM, "attn_q": T.ATTN_Q, "attn_k": T.ATTN_K, "attn_v": T.ATTN_V,
        "attn_output": T.ATTN_OUT, "attn_q_norm": T.ATTN_Q_NORM, "attn_k_norm": T.ATTN_K_NORM,
        "ffn_norm": T.FFN_NORM, "ffn_gate_inp": T.FFN_GATE_INP, "ffn_gate_exps": T.FFN_GATE_EXP,
        "ffn_down_exps": T.FFN_DOWN_EXP, "ffn_up_exps": T.FFN_UP_EXP,
        "ffn_gate": T.FFN_GATE, "ffn_down": T.FFN_DOWN, "ffn_up": T.FFN_UP,
    }

    def names(short: str, bid: int | None = None) -> str:
        base = gguf.TENSOR_NAMES[table[short]]
        return (base.format(bid=bid) if bid is not None else base) + ".weight"

    return names


def _seed_words(seed: int, name: str) -> list[int]:
    """The random stream of one tensor: the seed and the tensor's name."""
    return [seed, len(name)] + [ord(c) for c in name]


def tensor_type(spec: TensorSpec, quant: str, other_quant: str) -> str:
    """The ggml type a tensor is written in (see the module docstring for the recipe)."""
    if spec.dtype == np.float32 or quant == "F16":
        return np.dtype(spec.dtype).name.replace("float", "F")
    return quant if _FFN_WEIGHT.search(spec.name) else other_quant


def recipe(quant: str, other_quant: str, arch_has_experts: bool) -> dict[str, str]:
    """Tensor classes -> ggml type, for the JSON description."""
    f32 = "norms" + (", ffn_gate_inp" if arch_has_experts else "")
    if quant == "F16":
        return {"matrices": "F16", f32: "F32"}
    ffn = "ffn_gate_exps, ffn_up_exps, ffn_down_exps" if arch_has_experts else "ffn_gate, ffn_up, ffn_down"
    return {ffn: quant, "token_embd, output, attn_q, attn_k, attn_v, attn_output": other_quant, f32: "F32"}


def _fill(spec: TensorSpec, seed: int, threads: int) -> np.ndarray:
    """Random N(0, std^2) tensor in spec.dtype, generated in parallel slices (numpy releases the GIL)."""
    out: np.ndarray = np.empty(spec.shape, dtype=spec.dtype)
    if spec.std == 0.0:
        out.fill(1)
        return out
    flat = out.reshape(-1)
    n = flat.size
    step = 1 << 20  # fixed, so the bytes do not depend on the thread count
    starts = list(range(0, n, step))
    seeds = np.random.SeedSequence(_seed_words(seed, spec.name)).spawn(len(starts))

    def work(k: int) -> None:
        lo, hi = starts[k], min(n, starts[k] + step)
        rng = np.random.default_rng(seeds[k])
        buf = rng.standard_normal(hi - lo, dtype=np.float32)
        buf *= spec.std
        flat[lo:hi] = buf

    if len(starts) == 1:
        work(0)
    else:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(work, range(len(starts))))
    return out


# GGUF metadata value types (gguf's GGUFValueType): struct formats of the scalars, STRING and ARRAY.
_GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_GGUF_STRING, _GGUF_ARRAY = 8, 9


def read_gguf_kv(path: Path, prefix: str) -> list[tuple[str, Any, int, int | None]]:
    """(key, value, type, array item type) of the metadata keys starting with prefix, from the header alone.

    Why not gguf.GGUFReader: it builds a numpy view per array item, ~30 s for qwen2's 151 936 tokens and
    merges; this takes about a second. Strings stay bytes, so they are copied exactly.
    """
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        pos = 0

        def take(fmt: str):
            nonlocal pos
            (value,) = struct.unpack_from("<" + fmt, buf, pos)
            pos += struct.calcsize("<" + fmt)
            return value

        def value_of(vtype: int):
            nonlocal pos
            if vtype in _GGUF_SCALARS:
                return take(_GGUF_SCALARS[vtype])
            if vtype == _GGUF_STRING:
                n = take("Q")
                pos += n
                return bytes(buf[pos - n:pos])
            raise ValueError(f"unknown value type {vtype}")

        try:
            if bytes(buf[:4]) != b"GGUF" or struct.unpack_from("<I", buf, 4)[0] not in (2, 3):
                raise ValueError("no GGUF v2/v3 header")
            pos = 8
            take("Q")  # tensor count
            out = []
            for _ in range(take("Q")):
                key = value_of(_GGUF_STRING).decode()
                vtype = take("I")
                if vtype == _GGUF_ARRAY:
                    item_type, count = take("I"), take("Q")
                    value, sub_type = [value_of(item_type) for _ in range(count)], item_type
                else:
                    value, sub_type = value_of(vtype), None
                if key.startswith(prefix):
                    out.append((key, value, vtype, sub_type))
        except (ValueError, struct.error, UnicodeDecodeError) as exc:
            raise PinsetError(f"{path}: not a readable GGUF file ({exc})") from None
    return out


def _copy_tokenizer(gguf, writer, vocab_path: Path) -> int:
    """Copy every tokenizer.* key of a vocab GGUF into writer; return the vocabulary size."""
    n_vocab = 0
    for key, value, vtype, sub_type in read_gguf_kv(vocab_path, "tokenizer."):
        if key == "tokenizer.ggml.tokens":
            n_vocab = len(value)
        sub = gguf.GGUFValueType(sub_type) if sub_type is not None else None
        writer.add_key_value(key, value, gguf.GGUFValueType(vtype), sub_type=sub)
    if not n_vocab:
        raise PinsetError(f"{vocab_path} has no tokenizer.ggml.tokens")
    return n_vocab


@dataclass(frozen=True)
class SynthResult:
    path: Path
    shape: Shape
    n_vocab: int
    n_params: int
    size_bytes: int
    vocab_path: Path
    seed: int
    quant: str = "F16"
    recipe: dict | None = None
    tensor_types: dict | None = None  # ggml type -> number of tensors

    def to_json(self) -> dict:
        return {"path": str(self.path), "shape": asdict(self.shape), "n_vocab": self.n_vocab,
                "n_params": self.n_params, "size_bytes": self.size_bytes, "vocab_path": str(self.vocab_path),
                "seed": self.seed, "quant": self.quant, "recipe": self.recipe, "tensor_types": self.tensor_types}


def _bytes_per_weight(qtype: str) -> float:
    if qtype in blocks.BLOCK:
        per_block, block_bytes = blocks.BLOCK[qtype]
        return block_bytes / per_block
    return {"F16": 2.0, "F32": 4.0}[qtype]


def model_bytes(shape: Shape, n_vocab: int, quant: str, other_quant: str) -> int:
    """The size of the tensors write_synthetic_gguf writes (the recipe of tensor_type), from the shape alone:
    checked before the tensor list is made, which for an absurd shape would not fit in memory either."""
    matrices = "F16" if quant == "F16" else other_quant
    e = shape.n_embd
    attn = 2 * e * (shape.n_head + shape.n_head_kv) * shape.head_dim
    ffn = 3 * e * (shape.n_expert * shape.expert_ff if shape.n_expert else shape.n_ff)
    qk_norms = 2 * shape.head_dim if shape.arch == "qwen3moe" else 0
    small = 2 * e + qk_norms + shape.n_expert * e                   # norms, q/k norms, router (F32)
    embeddings = n_vocab * e * (1 if shape.tie_embeddings else 2)
    return int(shape.n_layer * (attn * _bytes_per_weight(matrices) + ffn * _bytes_per_weight(quant) + small * 4)
               + embeddings * _bytes_per_weight(matrices) + e * 4)


def _check_room(shape: Shape, n_vocab: int, quant: str, other_quant: str, folder: Path) -> None:
    """A model larger than the free space where it goes is bad input, named before anything is written."""
    need = model_bytes(shape, n_vocab, quant, other_quant)
    free = shutil.disk_usage(folder).free
    if need > free:
        raise PinsetError(f"{shape.describe()} in {quant} needs {need / 1e9:,.1f} GB, {folder} has "
                          f"{free / 1e9:,.1f} GB free")


def write_synthetic_gguf(shape: Shape, dest: Path, *, vocab_path: Path, seed: int = 0, name: str | None = None,
                         trees: Sequence[Path | str | None] = (), threads: int | None = None, quant: str = "F16",
                         other_quant: str = "Q8_0") -> SynthResult:
    """Write the model to dest in `quant` (F16, or one of blocks.TYPES written directly, no F16 first).

    Tensors are generated and written one at a time, so memory stays near the largest tensor (token_embd);
    dest appears only complete (a temp file renamed at the end, so a crash leaves no half model).
    """
    quant, other_quant = quant.upper(), other_quant.upper()
    if quant not in DIRECT_QUANTS:
        raise PinsetError(f"--quant {quant}: not written directly (direct types: {', '.join(DIRECT_QUANTS)})")
    if other_quant not in OTHER_QUANTS:
        raise PinsetError(f"--other-quant {other_quant}: not one of {', '.join(OTHER_QUANTS)}")
    gguf = import_gguf(list(trees) + [vocab_path.parent.parent])
    threads = threads or min(16, os.cpu_count() or 1)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    writer = gguf.GGUFWriter(str(tmp), shape.arch)
    a = shape.arch
    writer.add_name(name or f"pinset-synth-{a}")
    writer.add_string("general.description", "random weights written by `pinset model synth` (not a trained model)")
    writer.add_uint32("general.file_type", 1 if quant == "F16" else int(gguf.LlamaFileType[f"MOSTLY_{quant}"]))
    if quant != "F16":
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_uint32(f"{a}.context_length", shape.ctx_train)
    writer.add_uint32(f"{a}.embedding_length", shape.n_embd)
    writer.add_uint32(f"{a}.block_count", shape.n_layer)
    writer.add_uint32(f"{a}.feed_forward_length", shape.n_ff)
    writer.add_uint32(f"{a}.attention.head_count", shape.n_head)
    writer.add_uint32(f"{a}.attention.head_count_kv", shape.n_head_kv)
    writer.add_uint32(f"{a}.attention.key_length", shape.head_dim)
    writer.add_uint32(f"{a}.attention.value_length", shape.head_dim)
    writer.add_float32(f"{a}.rope.freq_base", shape.rope_freq_base)
    writer.add_float32(f"{a}.attention.layer_norm_rms_epsilon", shape.rms_eps)
    if a == "llama":
        writer.add_uint32(f"{a}.rope.dimension_count", shape.head_dim)
    if shape.n_expert:
        writer.add_uint32(f"{a}.expert_count", shape.n_expert)
        writer.add_uint32(f"{a}.expert_used_count", shape.n_expert_used)
        writer.add_uint32(f"{a}.expert_feed_forward_length", shape.expert_ff)
    n_vocab = _copy_tokenizer(gguf, writer, vocab_path)
    if a == "llama":
        writer.add_uint32(f"{a}.vocab_size", n_vocab)

    _check_room(shape, n_vocab, quant, other_quant, dest.parent)
    specs = tensor_specs(shape, n_vocab, _name_lookup(gguf))
    types = [tensor_type(spec, quant, other_quant) for spec in specs]
    for spec, qtype in zip(specs, types):
        if qtype in blocks.BLOCK:
            per_block, block_bytes = blocks.BLOCK[qtype]
            if spec.shape[-1] % per_block:
                raise PinsetError(f"{spec.name}: rows of {spec.shape[-1]} weights are not whole {qtype} blocks of "
                                  f"{per_block}: choose sizes that are multiples of {per_block}")
            try:
                blocks.scale_bits(qtype, spec.std)
            except ValueError as exc:
                raise PinsetError(f"{spec.name}: {exc}") from None
            byte_shape = (*spec.shape[:-1], spec.shape[-1] // per_block * block_bytes)
            writer.add_tensor_info(spec.name, byte_shape, np.dtype(np.uint8), int(np.prod(byte_shape)),
                                   raw_dtype=gguf.GGMLQuantizationType[qtype])
        else:
            nbytes = int(np.prod(spec.shape)) * np.dtype(spec.dtype).itemsize
            writer.add_tensor_info(spec.name, spec.shape, np.dtype(spec.dtype), nbytes)
    try:
        _write_tensors(writer, tmp, dest, specs, types, seed, threads)
    except OSError as exc:   # a disk that filled up meanwhile, a folder removed: a run-time failure, no traceback
        raise RuntimeFailure(f"writing {dest}: {(exc.strerror or str(exc)).lower()}") from None
    finally:
        if tmp.exists():
            tmp.unlink()
    n_params = sum(int(np.prod(s.shape)) for s in specs)
    counts = {t: types.count(t) for t in sorted(set(types))}
    return SynthResult(dest, shape, n_vocab, n_params, dest.stat().st_size, vocab_path, seed, quant,
                       recipe(quant, other_quant, bool(shape.n_expert)), counts)


def _write_tensors(writer, tmp: Path, dest: Path, specs: list[TensorSpec], types: list[str], seed: int,
                   threads: int) -> None:
    """Header, then one tensor at a time (memory stays near the largest), then the rename that makes dest appear."""
    writer.write_header_to_file(tmp)
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for spec, qtype in zip(specs, types):
        if qtype in blocks.BLOCK:
            data = blocks.random_blocks(qtype, int(np.prod(spec.shape)), spec.std, _seed_words(seed, spec.name),
                                        threads)
        else:
            data = _fill(spec, seed, threads)
        writer.write_tensor_data(data)
        del data
    writer.close()
    os.replace(tmp, dest)
