#!/usr/bin/env bash
# Device run for issue 27 (Trust III): `pinset verify --cuda` of a sabotaged copy of patches/cuda-mmq-iq1m
# (0001's IQ1_M sub-scale line `m1 = 2*((tmp >> 3) & 0x07) + 1` changed to `+ 3`), then the same head build's
# test-backend-ops run by hand with stdout and stderr kept apart, with and without -j, so the parser's counts
# can be checked against the program's own summary on real failing output.
#
# usage (repo root on the device; carry .carry and .whl; .carry/sab holds the sabotaged series + pins.yaml):
#   bash reports/trust-iii/run_sabotage.sh             output: $OUT
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/sab-out}
LIMIT=${LIMIT:-470}
mkdir -p "$OUT"
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > "$OUT/toolchain.txt" 2>&1 || echo "pip install of .whl failed" >> "$OUT/toolchain.txt"
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export PINSET_CACHE=/root/pinset-cache CCACHE_DIR=/root/ccache CUDA_VISIBLE_DEVICES=0
mkdir -p "$PINSET_CACHE/downloads"
SDIST=llama_cpp_python-0.3.36.tar.gz
[ -f "$PINSET_CACHE/downloads/$SDIST" ] || cp ".carry/$SDIST" "$PINSET_CACHE/downloads/"
{ nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader; nvcc --version | tail -2;
  echo "nproc $(nproc)"; } >> "$OUT/toolchain.txt" 2>&1
CMD="python3 -m pinset verify -c .carry/sab/pins.yaml --builds pypi:llama-cpp-python==0.3.36 --cuda -j $(nproc) --op-jobs 4 --no-progress --json $OUT/verify.json --markdown $OUT/verify.md --logs /tmp/sab-logs"
echo "\$ $CMD" > "$OUT/verify.log"
timeout -s INT "$LIMIT" $CMD >> "$OUT/verify.log" 2>&1
echo "pinset verify exit $? after $(( $(date +%s) - T0 )) s" >> "$OUT/verify.log"
# The head CUDA build verify made: the build folder whose test-backend-ops exists and whose tree has the + 3 line.
TBO=""
for c in $(ls -t "$PINSET_CACHE"/builds/*/CMakeCache.txt "$PINSET_CACHE"/builds/*/*/CMakeCache.txt 2>/dev/null); do
  d=$(dirname "$c")
  if grep -qs "GGML_CUDA:BOOL=ON" "$c" && [ -x "$d/bin/test-backend-ops" ]; then TBO=$d/bin/test-backend-ops; break; fi
done
echo "head test-backend-ops: ${TBO:-none found}" >> "$OUT/verify.log"
if [ -n "$TBO" ]; then
  mkdir -p /tmp/raw
  for j in 4 1; do for op in MUL_MAT MUL_MAT_ID; do
    [ $(( $(date +%s) - T0 )) -lt 560 ] || break
    a=(test -o "$op" -b CUDA0 -p type_a=iq1_m); [ "$j" = 1 ] || a+=(-j "$j")
    echo "\$ $TBO ${a[*]}" > "/tmp/raw/$op-j$j.cmd"
    timeout 60 "$TBO" "${a[@]}" > "/tmp/raw/$op-j$j.stdout" 2> "/tmp/raw/$op-j$j.stderr"; echo "exit $?" >> "/tmp/raw/$op-j$j.cmd"
    timeout 60 "$TBO" "${a[@]}" > "/tmp/raw/$op-j$j.merged" 2>&1
  done; done
  tar -czf "$OUT/raw.tar.gz" -C /tmp raw
fi
tar -czf "$OUT/logs.tar.gz" -C /tmp sab-logs 2>/dev/null
echo "done after $(( $(date +%s) - T0 )) s" >> "$OUT/verify.log"
exit 0
