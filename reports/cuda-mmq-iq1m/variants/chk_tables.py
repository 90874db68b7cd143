import re, sys, numpy as np
src = open('/work/kernel/llama.cpp/ggml/src/ggml-common.h').read()
m = re.search(r'GGML_TABLE_BEGIN\(uint32_t, iq1s_grid_gpu, NGRID_IQ1S\)(.*?)GGML_TABLE_END', src, re.S)
GRID = [int(v, 16) for v in re.findall(r'0x[0-9a-fA-F]+', m.group(1))]
inc = open('tables.inc').read()
A = [int(v,16) for v in re.findall(r'0x[0-9a-f]+', inc.split('iq1m_grid_val_gpu')[0].split('= {')[1])]
B = [int(v,16) for v in re.findall(r'0x[0-9a-f]+', inc.split('iq1m_grid_val_gpu')[1].split('= {')[1])]
assert len(A) == 4096 and len(B) == 4096
def bp(x, y, s):
    pool = (x & 0xFFFFFFFF) | ((y & 0xFFFFFFFF) << 32); out = 0
    for n in range(4):
        sel = (s >> 4*n) & 0xF; assert sel < 8
        out |= ((pool >> 8*sel) & 0xFF) << 8*n
    return out
bad = 0
for idx in range(4096):
    grid = GRID[idx & 0x7FF]; qhl = idx >> 8
    table = 0x0007FFF7 if (qhl & 0x08) else 0x000901F9
    v0415 = bp(table, table, grid); v2637 = bp(table, table, grid >> 16)
    ref = (bp(v0415, v2637, 0x6420), bp(v0415, v2637, 0x7531))
    a = (bp(0x000901F9, 0x0007FFF7, A[idx]), bp(0x000901F9, 0x0007FFF7, A[idx] >> 16))
    b = (B[idx] & 0xFFFFFFFF, B[idx] >> 32)
    bad += (a != ref) + (b != ref)
print("mismatches", bad)
