"""Compare the SASS of two objects function by function (`cuobjdump -sass`, instruction text without encodings).

Used to show that the committed 0001 compiles to the measured epilogue candidate e1: mmq-instance-iq1_m.cu.o of the
call1 0001 + vecdot.diff tree built with -DGGML_CUDA_IQ1_M_VD=1 against the same object of the committed series.
usage: same_sass.py A.o B.o"""
import re, subprocess, sys
def funcs(o):
    out = subprocess.run(['cuobjdump', '-sass', o], capture_output=True, text=True).stdout
    fs = {}; cur = None
    for line in out.splitlines():
        m = re.search(r'Function : (\S+)', line)
        if m: cur = m.group(1); fs[cur] = []; continue
        m = re.match(r'\s+/\*[0-9a-f]{4,}\*/\s+(.*?);', line)
        if m and cur: fs[cur].append(re.sub(r'\s+', ' ', m.group(1)))
    return fs
a, b = funcs(sys.argv[1]), funcs(sys.argv[2])
for f in sorted(a):
    m = re.search(r'mul_mat_qIL9ggml_type(\d+)ELi(\d+)ELb([01])', f)
    tag = f'mul_mat_q J={m.group(2)} fb={m.group(3)}' if m else f[:60]
    if f not in b: print('missing', tag); continue
    same = a[f] == b[f]
    if not same: print(f'{tag}: DIFFER ({len(a[f])} vs {len(b[f])} instructions)')
print('functions', len(a), len(b), 'identical:', sum(a[f] == b.get(f) for f in a))
