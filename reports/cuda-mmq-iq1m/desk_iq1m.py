#!/usr/bin/env python3
"""Desk-check of ggml_cuda_mmq_load_tiles_iq1_m (numpy emulation of its per-thread indexing, its __byte_perm lookups
and both tile contracts: value k = int8 x_qs[k] * float x_df[k/16] for dp4a/AMD, and
int8 x_qs[k] * int x_sc[k/16] * float x_df[16] for NVIDIA tensor cores) against
  (a) ggml's CPU dequantize_row_iq1_m on blocks produced by ggml_quantize_chunk (file argument), and
  (b) a numpy port of CUDA dequantize_iq1_m (dequantize.cuh) on random bit patterns (every field value);
and of the arithmetic of ggml_cuda_mmq_vec_dot_iq1_m_q8_1_mma: (c) the dp2a combine (the two per-16 results as the
16 bit halves of one int, __byte_perm(C0, C1, 0x5410), weighted by the bytes (2s0+1) | (2s1+1) << 8 with __dp2a_lo)
equals C0*m0 + C1*m1 over the whole range of |C|, and the int-to-float conversion by adding 1.5*2^23 is exact over the
whole range of that sum, and (d) its order of operations (int combine per 32, float per 32, d per 128) matches a
float64 dot product against q8_1 activations.
Usage: desk_iq1m.py ggml-common.h quantized.bin   (quantized.bin.f32 = ggml's dequantized output)"""
import re, sys
import numpy as np

src = open(sys.argv[1]).read()
m = re.search(r'GGML_TABLE_BEGIN\(uint32_t, iq1s_grid_gpu, NGRID_IQ1S\)(.*?)GGML_TABLE_END', src, re.S)
GRID = [int(v, 16) for v in re.findall(r'0x[0-9a-fA-F]+', m.group(1))]
assert len(GRID) == 2048

def byte_perm(x, y, s):
    """CUDA __byte_perm: output byte n = byte (s >> 4n) & 7 of the pair y:x (the selectors used here are < 8)."""
    pool = (x & 0xFFFFFFFF) | ((y & 0xFFFFFFFF) << 32)
    out = 0
    for n in range(4):
        sel = (s >> 4*n) & 0xF
        assert sel < 8
        out |= ((pool >> 8*sel) & 0xFF) << 8*n
    return out

def combine(c0, c1, m0, m1, magic):
    """The vec-dot's int combine, __dp2a_lo(__byte_perm(C0, C1, 0x5410), m0 | m1 << 8, magic), on ints or int64
    arrays: the byte permute keeps the low 16 bits of each result, the signed dp2a sign-extends those halves and the
    two low bytes of its second operand, and the sum wraps around in int32."""
    c01 = (c0 & 0xFFFF) | ((c1 & 0xFFFF) << 16)
    m01 = m0 | (m1 << 8)
    s16 = lambda v: ((v & 0xFFFF) ^ 0x8000) - 0x8000
    s8 = lambda v: ((v & 0xFF) ^ 0x80) - 0x80
    r = magic + s16(c01) * s8(m01) + s16(c01 >> 16) * s8(m01 >> 8)
    return ((r + 2**31) % 2**32) - 2**31

def f16(u):
    return np.float32(np.array([u], dtype=np.uint16).view(np.float16)[0])

def loader(b, mma=False):
    """One tile row as written by the 8 threads kqsx = 0..7 of ggml_cuda_mmq_load_tiles_iq1_m, as float values;
    mma=True: the NVIDIA tensor-core layout (returns the int8 values and the 16 packed scale slots too)."""
    b = bytes(b)
    x_qs = [0]*64
    x_df = [np.float32(0)]*16
    x_sc = [0]*16
    sc01 = int.from_bytes(b[48:52], 'little'); sc23 = int.from_bytes(b[52:56], 'little')
    for kqsx in range(8):
        qs = b[4*kqsx:4*kqsx+4]                                   # get_int_b4(bxi->qs, kqsx)
        qh = int.from_bytes(b[32+2*kqsx:34+2*kqsx], 'little')     # ((const uint16_t *) bxi->qh)[kqsx]
        for l in range(4):
            qhl = qh >> (4*l)
            grid = GRID[qs[l] | ((qhl & 0x07) << 8)]
            table = 0x0007FFF7 if (qhl & 0x08) else 0x000901F9
            v0415 = byte_perm(table, table, grid >> 0)
            v2637 = byte_perm(table, table, grid >> 16)
            x_qs[8*kqsx + 2*l + 0] = byte_perm(v0415, v2637, 0x6420)
            x_qs[8*kqsx + 2*l + 1] = byte_perm(v0415, v2637, 0x7531)
        u16 = ((sc01 >> 12) & 0x000F) | ((sc01 >> 24) & 0x00F0) | ((sc23 >> 4) & 0x0F00) | ((sc23 >> 16) & 0xF000)
        sc_word = sc01 if kqsx < 4 else sc23
        tmp = sc_word >> (16*((kqsx//2) % 2) + 6*(kqsx % 2))
        m0, m1 = 2*((tmp >> 0) & 7) + 1, 2*((tmp >> 3) & 7) + 1
        d = f16(u16) * np.float32(0.125)
        x_sc[2*kqsx+0] = m0
        x_sc[2*kqsx+1] = m1
        x_d16 = d                                                 # slot QK_K/16, written by all 8 threads
        x_df[2*kqsx+0] = d * np.float32(m0)
        x_df[2*kqsx+1] = d * np.float32(m1)
    q8 = np.array(x_qs, dtype=np.uint32).view(np.int8).astype(np.int32)
    assert set(np.unique(q8).tolist()) <= {-9, -7, -1, 1, 7, 9}
    if mma:
        m = np.array(x_sc, dtype=np.int32)
        vals = (q8 * m[np.arange(256)//16]).astype(np.float32) * x_d16
        return vals, q8, m, x_d16
    return q8.astype(np.float32) * np.array(x_df, dtype=np.float32)[np.arange(256)//16]

def cuda_dequant(b):
    """numpy port of dequantize_iq1_m (ggml-cuda/dequantize.cuh), all 32 threads."""
    b = bytes(b)
    y = np.zeros(256, dtype=np.float32)
    sc = [int.from_bytes(b[48+2*w:50+2*w], 'little') for w in range(4)]
    u16 = (sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000)
    for tid in range(32):
        il, ib = tid // 8, tid % 8
        ib16 = 2*ib + il//2
        d = f16(u16) * np.float32(2*((sc[ib16//4] >> 3*(ib16 % 4)) & 0x7) + 1)
        qh = b[32 + 2*ib + il//2]
        delta = np.float32(-1 - 0.125) if qh & (0x08 << 4*(il % 2)) else np.float32(-1 + 0.125)
        g = GRID[b[4*ib+il] | (((qh >> 4*(il % 2)) & 7) << 8)]
        q = [(g >> 8*j) & 0x0f for j in range(4)] + [(g >> (8*j + 4)) & 0x0f for j in range(4)]
        for j in range(8):
            y[32*ib + 8*il + j] = d * (np.float32(q[j]) + delta)
    return y

ok = True
# (a) real quantized data vs ggml CPU dequantization
q = np.fromfile(sys.argv[2], dtype=np.uint8)
ref = np.fromfile(sys.argv[2] + '.f32', dtype=np.float32)
blocks = q.reshape(-1, 56)
emu = np.concatenate([loader(b) for b in blocks])
a_ok = np.array_equal(emu, ref)
print(f"(a) {len(blocks)} quantized blocks: loader == ggml dequantize_row_iq1_m: {a_ok} (max|diff| {np.abs(emu-ref).max():.3g})")
ok &= a_ok
# (b) random bit patterns (every qh nibble, sub-scale and d nibble value) vs CUDA dequantize port
rng = np.random.default_rng(0)
rb = rng.integers(0, 256, size=(512, 56), dtype=np.uint8)
rb[:, 55] = (rb[:, 55] & 0x0F) | 0x30  # top nibble of sc[3] holds d's sign/exponent bits: keep d finite
b_ok = all(np.array_equal(loader(b), cuda_dequant(b)) for b in rb)
sc16 = rb[:, 48:56].copy().view('<u2').astype(np.int32)
cover = sorted(set(((sc16[:, :, None] >> (3*np.arange(4))) & 7).ravel().tolist()))
print(f"(b) 512 random blocks: loader == CUDA dequantize_iq1_m port: {b_ok}; sub-scale values covered: {cover}")
ok &= b_ok
c_ok = True
for mb in rb:
    c_ok &= np.array_equal(loader(mb, mma=True)[0], cuda_dequant(mb))
print(f"(b) 512 random blocks, tensor-core layout: int8 * (2s+1) * d/8 == CUDA dequantize_iq1_m port: {c_ok}")
ok &= c_ok

# (c) the dp2a combine over the whole range of one per-16 result |C| <= 16*9*127 (a 16 bit half) and every pair of
# sub-scales, and the exact int -> float conversion of ci = C0*m0 + C1*m1 over its whole range
cmax = 16*9*127
c0 = np.arange(-cmax, cmax + 1, dtype=np.int64)                    # every value of one half
c1 = rng.integers(-cmax, cmax + 1, size=c0.size).astype(np.int64)  # the other half random ...
c1[:4] = [-cmax, cmax, 0, -1]                                      # ... and its extremes
comb_ok = cmax < 2**15 and combine(cmax, -cmax, 15, 13, 0x4B400000) == cmax*15 - cmax*13 + 0x4B400000
for m0 in range(1, 16, 2):
    for m1 in range(1, 16, 2):
        for a, b in ((c0, c1), (c1, c0)):
            comb_ok &= bool(np.array_equal(combine(a, b, m0, m1, 0x4B400000), a*m0 + b*m1 + 0x4B400000))
print(f"(c) |C| <= 16*9*127 = {cmax} < 2^15: {cmax < 2**15}; dp2a combine == C0*m0 + C1*m1 + 1.5*2^23 for every value of "
      f"C0 (and of C1) against random partners, all 64 sub-scale pairs: {comb_ok}")
ok &= comb_ok
bound = 2*15*16*9*127
ci = np.arange(-bound, bound + 1, dtype=np.int64)
conv = (ci + 0x4B400000).astype(np.uint32).view(np.float32) - np.float32(12582912.0)
c_exact = np.array_equal(conv.astype(np.int64), ci)
print(f"(c) |C0*m0 + C1*m1| <= 2*15*16*9*127 = {bound} < 2^22: {bound < 2**22}; bit conversion exact over the range: {c_exact}")
ok &= c_exact and bound < 2**22

# (d) the vec-dot's order of operations on real quantized rows against random q8_1 activations
worst = 0.0
for blk in blocks[:256]:
    vals, q8, m, dA = loader(blk, mma=True)
    a = rng.integers(-127, 128, size=256).astype(np.int32)         # q8_1 values
    dB = rng.uniform(0.001, 0.05, size=8).astype(np.float32)        # one q8_1 scale per 32 values
    ref = float(np.sum(vals.astype(np.float64) * a * np.repeat(dB.astype(np.float64), 32)))
    total = np.float32(0)
    for k00 in (0, 128):                                            # two calls per tile (k00 = 0, MMQ_TILE_NE_K)
        acc = np.float32(0)
        for k32 in range(k00, k00 + 128, 32):
            c0 = int(np.dot(q8[k32:k32+16], a[k32:k32+16])); c1 = int(np.dot(q8[k32+16:k32+32], a[k32+16:k32+32]))
            ci_ = combine(c0, c1, int(m[k32//16]), int(m[k32//16 + 1]), 0x4B400000)
            f = np.array([ci_], dtype=np.int64).astype(np.uint32).view(np.float32)[0] - np.float32(12582912.0)
            acc = np.float32(acc + dB[k32//32]*f)
        total = np.float32(total + acc*dA)
    scale = float(np.sum(np.abs(vals.astype(np.float64) * a * np.repeat(dB.astype(np.float64), 32)))) or 1.0
    worst = max(worst, abs(float(total) - ref)/scale)
d_ok = worst < 1e-5
print(f"(d) 256 rows x random q8_1 activations: vec-dot order of operations vs float64: worst |diff|/sum|terms| = {worst:.2e}: {d_ok}")
ok &= d_ok
print("DESK CHECK", "PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
