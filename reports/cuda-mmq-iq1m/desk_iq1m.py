#!/usr/bin/env python3
"""Desk-check of ggml_cuda_mmq_load_tiles_iq1_m (numpy emulation of its per-thread indexing and the
q8_0_16 tile contract: value k = int8 x_qs[k] * float x_df[k/16]) against
  (a) ggml's CPU dequantize_row_iq1_m on blocks produced by ggml_quantize_chunk (file argument), and
  (b) a numpy port of CUDA dequantize_iq1_m (dequantize.cuh) on random bit patterns (every field value).
Usage: desk_iq1m.py ggml-common.h quantized.bin   (quantized.bin.f32 = ggml's dequantized output)"""
import re, sys
import numpy as np

src = open(sys.argv[1]).read()
m = re.search(r'GGML_TABLE_BEGIN\(uint32_t, iq1s_grid_gpu, NGRID_IQ1S\)(.*?)GGML_TABLE_END', src, re.S)
GRID = [int(v, 16) for v in re.findall(r'0x[0-9a-fA-F]+', m.group(1))]
assert len(GRID) == 2048

def vsub4(a, b):
    return sum(((((a >> 8*k) & 0xFF) - ((b >> 8*k) & 0xFF)) & 0xFF) << 8*k for k in range(4))

def f16(u):
    return np.float32(np.array([u], dtype=np.uint16).view(np.float16)[0])

def loader(b):
    """One tile row as written by the 8 threads kqsx = 0..7 of ggml_cuda_mmq_load_tiles_iq1_m."""
    b = bytes(b)
    x_qs = [0]*64
    x_df = [np.float32(0)]*16
    sc01 = int.from_bytes(b[48:52], 'little'); sc23 = int.from_bytes(b[52:56], 'little')
    for kqsx in range(8):
        qs = b[4*kqsx:4*kqsx+4]                                   # get_int_b4(bxi->qs, kqsx)
        qh = int.from_bytes(b[32+2*kqsx:34+2*kqsx], 'little')     # ((const uint16_t *) bxi->qh)[kqsx]
        for l in range(4):
            qhl = qh >> (4*l)
            grid = GRID[qs[l] | ((qhl & 0x07) << 8)]
            off = 0x09090909 if (qhl & 0x08) else 0x07070707
            x_qs[8*kqsx + 2*l + 0] = vsub4((grid << 3) & 0x78787878, off)
            x_qs[8*kqsx + 2*l + 1] = vsub4((grid >> 1) & 0x78787878, off)
        u16 = ((sc01 >> 12) & 0x000F) | ((sc01 >> 24) & 0x00F0) | ((sc23 >> 4) & 0x0F00) | ((sc23 >> 16) & 0xF000)
        d = f16(u16) * np.float32(0.125)
        sc_word = sc01 if kqsx < 4 else sc23
        tmp = sc_word >> (16*((kqsx//2) % 2) + 6*(kqsx % 2))
        x_df[2*kqsx+0] = d * np.float32(2*((tmp >> 0) & 7) + 1)
        x_df[2*kqsx+1] = d * np.float32(2*((tmp >> 3) & 7) + 1)
    q8 = np.array(x_qs, dtype=np.uint32).view(np.int8).astype(np.int32)
    assert set(np.unique(q8).tolist()) <= {-9, -7, -1, 1, 7, 9}
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
print("per-16 int dot bound 9*127*16 =", 9*127*16, "(no int32 overflow)")
print("DESK CHECK", "PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
