"""Random but valid quantized blocks (Q8_0, Q4_0, IQ1_S, IQ1_M) written straight from random bits.

Why: a full-depth synthetic model (48-layer Qwen3-30B-A3B shape, ~29 B expert weights) in IQ1_M is
~7 GB, but going through F16 -> llama-imatrix -> llama-quantize would need a ~60 GB F16 file and an
hour. The speed and CPU-vs-GPU KLD of a build need valid blocks of the right type with sane scales,
not the quantization of particular floats, so we draw the quant codes at random and set the scales
so that the dequantized weights have the intended standard deviation.

Layouts are ggml's (ggml/src/ggml-common.h), QK_K = 256:
- Q8_0  {half d; int8 qs[32]}                                   w = d * q
- Q4_0  {half d; uint8 qs[16]} (nibbles)                       w = d * (nibble - 8)
- IQ1_S {half d; uint8 qs[32]; uint16 qh[8]}                   per 32 weights: qh bits 0-11 grid index
  high bits, 12-14 scale s, 15 delta sign; w = d * (2s+1) * (grid + delta)
- IQ1_M {uint8 qs[32]; uint8 qh[16]; uint16 scales[4]}          per 16 weights a 3-bit scale s (low 12 bits
  of each uint16), the fp16 super-block d in the top 4 bits of the four uint16; per 8 weights 3 index
  bits and a delta sign in qh; w = d * (2s+1) * (grid + delta)
Every 11-bit IQ1 grid index is valid and the grid entries are in {-1, 0, 1} (symmetric, mean ~0,
mean square 0.594), delta = +-1/8, so random bits are valid blocks; only d and s need choosing.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

QK_K = 256
IQ1_DELTA = 0.125
# Mean square of an IQ1 grid value (the 2048 x 8 iq1s_grid: 4875 x -1, 6649 x 0, 4860 x 1) plus delta^2.
IQ1_UNIT_MS = 9735 / 16384 + IQ1_DELTA**2
# We force the top bit of every 3-bit IQ1 sub-scale (s in 4..7, multipliers 9..15): sub-blocks vary in
# magnitude like a real model's without the 15x spread of s in 0..7.
IQ1_SCALE_MS = (9**2 + 11**2 + 13**2 + 15**2) / 4

# (elements per block, bytes per block), as in gguf's GGML_QUANT_SIZES (checked by the tests).
BLOCK = {"Q8_0": (32, 34), "Q4_0": (32, 18), "IQ1_S": (QK_K, 50), "IQ1_M": (QK_K, 56)}
TYPES = tuple(BLOCK)

# Blocks drawn per random stream: fixed, so the bytes do not depend on the thread count.
CHUNK_BLOCKS = 1 << 15


def unit_rms(qtype: str) -> float:
    """RMS of the dequantized weights of `qtype` blocks at d = 1 (what d divides the target std by)."""
    if qtype == "Q8_0":
        return math.sqrt(sum(v * v for v in range(-127, 128)) / 256)  # -127..127, 0 twice
    if qtype == "Q4_0":
        return math.sqrt(sum(v * v for v in range(-7, 8)) / 16)  # -7..7, 0 twice
    return math.sqrt(IQ1_SCALE_MS * IQ1_UNIT_MS)


def scale_bits(qtype: str, std: float) -> int:
    """fp16 bits of the super-block scale d that gives weights of standard deviation std.

    Refuses a d below fp16's smallest normal number (2^-14): such weights would lose their precision.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        d = np.float16(std / unit_rms(qtype))
    if not np.isfinite(d) or abs(float(d)) < 2.0**-14:
        raise ValueError(f"a {qtype} weight std of {std:.3g} needs a block scale outside fp16's normal range")
    return int(np.array(d).view(np.uint16))


def _symmetric_int8(raw: np.ndarray) -> np.ndarray:
    """Random bytes -> int8 codes -127..127 with mean exactly 0 (sign-magnitude: bit 7 sign, bits 0-6 size).

    Plain random int8 would include -128 and have mean -0.5, a bias shared by every weight.
    """
    sign = raw >> np.uint8(7)
    return ((raw & np.uint8(0x7F)) ^ (np.uint8(0) - sign)) + sign  # two's complement negate where sign = 1


def _symmetric_nibbles(raw: np.ndarray) -> np.ndarray:
    """Random bytes -> two Q4_0 nibbles each, stored codes 1..15 (values -7..7, mean exactly 0).

    Per nibble bits 0-2 are a magnitude m and bit 3 a sign: code 8 + m = 0x8 | m, or 8 - m = (m ^ 7) + 1.
    """
    mag = raw & np.uint8(0x77)
    negative = ((raw >> np.uint8(3)) & np.uint8(0x11)) * np.uint8(0x0F)  # 0xF per negative nibble
    return (((mag ^ np.uint8(0x77)) + np.uint8(0x11)) & negative) | ((mag | np.uint8(0x88)) & ~negative)


def _fill_chunk(qtype: str, raw: np.ndarray, d_bits: int) -> np.ndarray:
    """Turn (n, block bytes) random bytes into valid blocks with super-block scale d (fp16 bits)."""
    if qtype == "Q8_0":
        raw[:, 2:] = _symmetric_int8(raw[:, 2:])
    elif qtype == "Q4_0":
        raw[:, 2:] = _symmetric_nibbles(raw[:, 2:])
    elif qtype == "IQ1_S":
        qh = raw[:, 34:].view(np.uint16)
        qh |= np.uint16(0x4000)  # scale s in 4..7
    elif qtype == "IQ1_M":
        sc = raw[:, 48:].view(np.uint16)
        sc &= np.uint16(0x0FFF)
        sc |= np.uint16(0x0924)  # each of the four 3-bit scales in 4..7
        sc |= (np.uint16(d_bits) >> np.array([0, 4, 8, 12], dtype=np.uint16) & np.uint16(0xF)) << np.uint16(12)
        return raw
    else:
        raise ValueError(f"no random blocks for {qtype}")
    raw[:, :2] = np.array([d_bits], dtype=np.uint16).view(np.uint8)  # Q8_0, Q4_0, IQ1_S: d comes first
    return raw


def random_blocks(qtype: str, n_elements: int, std: float, seed_words: list[int], threads: int = 1) -> np.ndarray:
    """n_elements weights of `qtype` as (n_blocks, block bytes) uint8, dequantizing to mean 0, RMS ~ std.

    Chunks of CHUNK_BLOCKS blocks each get their own child of SeedSequence(seed_words), so the bytes
    depend on the seed and the tensor, never on `threads`.
    """
    per_block, nbytes = BLOCK[qtype]
    if n_elements % per_block:
        raise ValueError(f"{n_elements} weights is not a whole number of {qtype} blocks of {per_block}")
    n_blocks = n_elements // per_block
    d_bits = scale_bits(qtype, std)
    out = np.empty((n_blocks, nbytes), dtype=np.uint8)
    starts = list(range(0, n_blocks, CHUNK_BLOCKS))
    seeds = np.random.SeedSequence(seed_words).spawn(len(starts))

    def work(k: int) -> None:
        lo, hi = starts[k], min(n_blocks, starts[k] + CHUNK_BLOCKS)
        words = -(-(hi - lo) * nbytes // 8)
        raw = np.random.Generator(np.random.PCG64(seeds[k])).bit_generator.random_raw(words)
        chunk = raw.view(np.uint8)[: (hi - lo) * nbytes].reshape(hi - lo, nbytes)
        out[lo:hi] = _fill_chunk(qtype, chunk, d_bits)

    if len(starts) == 1 or threads <= 1:
        for k in range(len(starts)):
            work(k)
    else:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(work, range(len(starts))))
    return out
