#!/usr/bin/env bash
# One cell of the two-class scale-out proof (issue 46), on its own single-GPU device machine, exactly as the
# reusable workflow's `cell` job runs it on its runner: the cell's `script` from matrix.json (made on the
# coordinator by `pinset matrix`), one command per line, each in turn, the cell red if one failed, with a
# fresh pinset cache (a fresh runner's workspace, holding only the carried sdist: no network there) and a
# fresh ccache.
#
# usage (repo root on the device; carry .carry and .whl, made with
#   python scripts/device_carry.py --version 0.3.36 --out .carry
#   python scripts/device_carry.py --wheels .whl):
#     OUT=$OUT CAP=560 bash reports/scale-out/two-class/run_cell.sh INDEX      # INDEX: 0 = h100, 1 = h200
# $OUT gets: cell-GPU.tgz (the cell's results folder: verify.json, verify.md, cell.log, logs/), and beside it
# machine-GPU.txt, wall-GPU.txt, verify-GPU.json.
set -uo pipefail
export PYTHONUNBUFFERED=1
i=${1:?cell index}
OUT=${OUT:-/tmp/cell-out}; CAP=${CAP:-560}
D=reports/scale-out/two-class
M=$D/matrix.json
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["include"][int(sys.argv[2])][sys.argv[3]])' "$M" "$i" "$1"; }
gpu=$(field gpu); results=$(field results); script=$(field script)
mkdir -p "$OUT" "$results"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$results/setup.log" 2>&1 || echo "wheel install failed (see setup.log)"
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export CCACHE_DIR=/root/ccache-cell-$i CCACHE_MAXSIZE=20G
rm -rf "$CCACHE_DIR"
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi; nvidia-smi --query-gpu=index,uuid,name,driver_version,compute_cap,memory.total --format=csv;
  nvcc --version; c++ --version | head -1; cmake --version | head -1; echo "ninja $(ninja --version)";
  echo "ccache: $(command -v ccache) $(ccache --version 2>/dev/null | head -1)"; python3 --version; echo "nproc $(nproc)"; } \
  > "$OUT/machine-$gpu.txt" 2>&1
cache=/root/pinset-cache-cell-$i
rm -rf "$cache"; mkdir -p "$cache/downloads"; cp .carry/*.tar.gz "$cache/downloads/"
status=0
t0=$(date +%s.%N)
while IFS= read -r command; do
  echo "+ $command" >> "$results/cell.log"
  PINSET_CACHE=$cache timeout -s INT -k 10 "$CAP" bash -c "$command" >> "$results/cell.log" 2>&1 || status=$?
done <<< "$script"
t1=$(date +%s.%N)
wall=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$t1")
echo "cell $i ($(field cell)) exit $status wall $wall s; $(nvidia-smi --query-gpu=name,uuid --format=csv,noheader)" | tee "$OUT/wall-$gpu.txt"
cp "$results/verify.json" "$OUT/verify-$gpu.json" 2>/dev/null || echo "no verify.json"
tar -czf "$OUT/cell-$gpu.tgz" results
tail -5 "$results/cell.log"
exit 0
