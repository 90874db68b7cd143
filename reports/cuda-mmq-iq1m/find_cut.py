#!/usr/bin/env python3
"""Dense IQ1_M cut-over point from a measured sweep: base (0c1e570, dequant+cuBLAS for n > 8) vs head
(IQ1_M MMQ) on MUL_MAT m=4096 k=14336.

n_c = smallest measured n > 8 such that MMQ is slower than base at n_c and at every larger measured n.
The cut N is the largest measured n below n_c: MMQ for n <= N, dequant+cuBLAS (the base path) above.
Batch sizes between N and n_c were not measured, so they keep the base path, which cannot be slower than base.
Prints the table and, last, 'CUT=<N>' or 'CUT=none' (MMQ never slower at the large-n end).

usage: find_cut.py perf.log BASE_LABEL HEAD_LABEL
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perflog import read_perf  # noqa: E402


def main():
    path, base_label, head_label = sys.argv[1:4]
    runs = read_perf(path)
    base, head = runs[base_label], runs[head_label]
    ns = sorted(n for (shape, t, n) in head if shape == 'dense' and t == 'iq1_m' and n > 8
                and ('dense', 'iq1_m', n) in base)
    if not ns:
        print('no dense iq1_m results')
        print('CUT=none')
        return 1
    print(f"{'n':>5} {'base us':>10} {'head us':>10} {'head/base':>9}")
    slower = {}
    for n in ns:
        b, h = base[('dense', 'iq1_m', n)], head[('dense', 'iq1_m', n)]
        slower[n] = h > b
        print(f"{n:>5} {b:>10.2f} {h:>10.2f} {h / b:>9.3f}{'  MMQ slower' if slower[n] else ''}")
    n_c = None
    for n in reversed(ns):
        if not slower[n]:
            break
        n_c = n
    if n_c is None:
        print('CUT=none')
        return 0
    below = [n for n in ns if n < n_c]
    cut = below[-1] if below else 8
    print(f'MMQ slower from n={n_c} on; largest measured n below it: {cut}')
    print(f'CUT={cut}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
