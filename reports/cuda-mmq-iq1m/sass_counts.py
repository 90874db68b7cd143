#!/usr/bin/env python3
"""SASS instruction counts of the MMQ kernels (mul_mat_q<type, J, fallback=false>) in `cuobjdump -sass` dumps of
mmq-instance-*.cu objects: a static proxy for the per-tile work of the loader and vec-dot (the kernels are
fully unrolled over one tile), used to compare versions of the IQ1_M kernel with IQ1_S without a GPU.

usage: sass_counts.py LABEL=DUMP [LABEL=DUMP ...]   (DUMP: output of `cuobjdump -sass mmq-instance-<type>.cu.o`)
"""
import collections
import re
import sys

OPS = ['IMMA', 'IMAD', 'IDP', 'I2FP', 'FFMA', 'FMUL', 'FADD', 'PRMT', 'LOP3', 'SHF', 'IADD3', 'SEL', 'LDS', 'LDG']


def kernels(path):
    """{(type, J): Counter of opcodes} for the non-fallback mul_mat_q kernels in one dump."""
    out, cur = {}, None
    for line in open(path, errors='replace'):
        m = re.search(r'Function : _Z9mul_mat_qIL9ggml_type(\d+)ELi(\d+)ELb0', line)
        if m:
            cur = (int(m.group(1)), int(m.group(2)))
            out[cur] = collections.Counter()
            continue
        if 'Function :' in line:
            cur = None
            continue
        m = cur and re.match(r'\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)', line)
        if m:
            out[cur][m.group(1)] += 1
    return out


def main():
    dumps = [a.split('=', 1) for a in sys.argv[1:]]
    if not dumps or any(len(d) != 2 for d in dumps):
        print(__doc__)
        return 2
    print('| version | J | total | ' + ' | '.join(OPS) + ' |')
    print('| --- | --- | --- | ' + ' | '.join('---' for _ in OPS) + ' |')
    for label, path in dumps:
        for (t, j), c in sorted(kernels(path).items(), key=lambda kv: kv[0][1]):
            if j in (8, 16, 32, 64, 96, 128):
                print(f'| {label} | {j} | {sum(c.values())} | ' + ' | '.join(str(c[o]) for o in OPS) + ' |')
    return 0


if __name__ == '__main__':
    sys.exit(main())
