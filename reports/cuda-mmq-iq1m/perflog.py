"""Parse test-backend-ops output captured by run_h200.sh (stdlib only, also used on the device).

perf.log holds several runs, each introduced by a line '### RUN <label> <binary>'; every perf result line is
  MUL_MAT(type_a=iq1_m,...,m=4096,n=16,k=14336,...):   1234 runs -   123.45 us/run - ...
"""
import re

ANSI = re.compile(r'\x1b\[[0-9;]*m')
RUN = re.compile(r'^### RUN (\S+)')
PERF = re.compile(r'^\s*(MUL_MAT(?:_ID)?)\((.*)\):\s+(\d+) runs -\s+([0-9.]+) us/run')
KV = re.compile(r'(\w+)=(\[[^\]]*\]|[^,]+)')
SUMMARY = re.compile(r'^\s*(\d+)/(\d+) tests passed')


def parse_vars(s):
    return {k: v for k, v in KV.findall(s)}


def shape_of(op, v):
    """'dense' for MUL_MAT m=4096 k=14336, 'moe' for MUL_MAT_ID 128x8 m=768 k=2048, else None."""
    if op == 'MUL_MAT' and v.get('m') == '4096' and v.get('k') == '14336' and v.get('bs') == '[1,1]':
        return 'dense'
    if op == 'MUL_MAT_ID' and v.get('n_mats') == '128' and v.get('n_used') == '8' and v.get('m') == '768' \
            and v.get('k') == '2048' and v.get('b') == '0':
        return 'moe'
    return None


def read_perf(path):
    """-> {label: {(shape, type, n): us_per_run}} in file order of runs."""
    runs = {}
    cur = None
    with open(path, errors='replace') as f:
        for line in f:
            line = ANSI.sub('', line)
            m = RUN.match(line)
            if m:
                cur = runs.setdefault(m.group(1), {})
                continue
            m = PERF.match(line)
            if m and cur is not None:
                op, v = m.group(1), parse_vars(m.group(2))
                shape = shape_of(op, v)
                if shape:
                    cur[(shape, v['type_a'], int(v['n']))] = float(m.group(4))
    return runs


def read_test_summary(path):
    """-> (passed, total, backend_ok) of a 'test-backend-ops test' log."""
    passed = total = None
    backend_ok = False
    with open(path, errors='replace') as f:
        for line in f:
            line = ANSI.sub('', line)
            m = SUMMARY.match(line)
            if m:
                passed, total = int(m.group(1)), int(m.group(2))
            if 'Backend CUDA0: OK' in line:
                backend_ok = True
    return passed, total, backend_ok
