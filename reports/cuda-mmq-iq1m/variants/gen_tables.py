"""Tables for the IQ1_M MMQ loader experiment, from iq1s_grid_gpu in ggml-common.h.
index i = qs | (qh nibble << 8): grid = iq1s_grid_gpu[i & 0x7FF], bit 11 = delta sign (set: delta = -1/8).
A: uint32 prmt selectors in value order (nibble k = n_k + 4*sign) for the byte pool 0x0007FFF7:0x000901F9.
B: uint64 int8 values 8*n_k - 7 - 2*sign in value order."""
import re, sys
src = open(sys.argv[1]).read()
m = re.search(r'GGML_TABLE_BEGIN\(uint32_t, iq1s_grid_gpu, NGRID_IQ1S\)(.*?)GGML_TABLE_END', src, re.S)
GRID = [int(v, 16) for v in re.findall(r'0x[0-9a-fA-F]+', m.group(1))]
assert len(GRID) == 2048
def nib(g):  # n_k in value order
    return [(g >> 8*j) & 0xF for j in range(4)] + [(g >> (8*j + 4)) & 0xF for j in range(4)]
A, B = [], []
for i in range(4096):
    n = nib(GRID[i & 0x7FF]); s = (i >> 11) & 1
    assert all(v <= 2 for v in n)
    A.append(sum((v + 4*s) << 4*k for k, v in enumerate(n)))
    B.append(sum(((8*v - 7 - 2*s) & 0xFF) << 8*k for k, v in enumerate(n)))
def emit(name, typ, vals, w):
    out = [f"static const __device__ {typ} {name}[4096] = {{"]
    per = 8 if w == 8 else 4
    for r in range(0, 4096, per):
        out.append("    " + " ".join(f"0x{v:0{w}x}," for v in vals[r:r+per]))
    out.append("};")
    return "\n".join(out)
print(emit("iq1m_grid_sel_gpu", "uint32_t", A, 8))
print(emit("iq1m_grid_val_gpu", "uint64_t", B, 16))
