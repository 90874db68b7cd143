#!/usr/bin/env bash
# Issue "a bench that decides", the H200 evidence: a full-depth synthetic Qwen3-30B-A3B (48 layers, 128 experts,
# 8 used) written directly in IQ1_M and IQ1_S (`pinset model synth --size a3b --direct`, no F16, no imatrix), then
#   bench-head-vs-base  pinset bench (adaptive rounds) head (the pin set) vs base on the IQ1_M model, -p 512,2048 -n 128
#   bench-aa            pinset bench --aa on the same model (base against itself)
#   bench-vs-iq1s       pinset bench --vs-model: IQ1_M vs IQ1_S (same shape and seed) on the head build
# Every step runs under the call's deadline (LIMIT s after start) and results are packed into $OUT after each
# step. A bench gets --max-time from the time left (at most MAXT_CAP s), so a cut bench still says how far it got.
# usage (repo root on the device; carry .carry and .whl from scripts/device_carry.py):
#   LIMIT=585 bash reports/bench-decides/run_h200.sh
# RESUME=1 in a second call on the still-warm machine skips the steps that ended (the models, the builds in the
# pinset cache and the results under /root survive while the machine is held); ONLY="name ..." runs just those.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/bench-decides-out}
LIMIT=${LIMIT:-585}
MAXT_CAP=${MAXT_CAP:-300}
T0=$(date +%s)
W=/root/bench-decides; R=$W/results; L=$W/logs; M=/root/models
mkdir -p "$OUT" "$R" "$L" "$M"
left() { echo $(( LIMIT - ($(date +%s) - T0) )); }
say() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$R/run.log"; }
pack() { tar -czf "$OUT/results.tgz" -C "$W" results 2>/dev/null; tar -czf "$OUT/logs.tgz" -C "$W" logs 2>/dev/null; }
step() {  # step NAME NEED_S CMD...: run CMD if NEED_S seconds are left, interrupted at the deadline
  local name=$1 need=$2; shift 2
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return 0; fi
  if [ -n "${RESUME:-}" ] && grep -Eq "END $name exit [01]\$" "$R/run.log" 2>/dev/null; then
    say "DONE $name (earlier call)"; return 0; fi
  if [ "$(left)" -lt "$need" ]; then say "SKIP $name: $(left) s left, needs ~$need s"; return 1; fi
  local cap=$(( $(left) - 5 ))
  say "START $name (at most $cap s): $*"
  timeout -s INT -k 10 "$cap" "$@" > "$L/$name.log" 2>&1
  local rc=$?
  tail -n 30 "$L/$name.log"
  say "END $name exit $rc"
  pack
  return $rc
}
maxt() { local t=$(( $(left) - ${1:-30} )); [ "$t" -gt "$MAXT_CAP" ] && t=$MAXT_CAP; echo "$t"; }

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$L/setup.log" 2>&1 || say "wheel install failed (see setup.log)"
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export PINSET_CACHE=/root/pinset-cache CCACHE_DIR=/root/ccache
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
mkdir -p "$PINSET_CACHE/downloads"
cp -n .carry/llama_cpp_python-0.3.36.tar.gz "$PINSET_CACHE/downloads/"
TREE=/root/llama-tree/llama_cpp_python-0.3.36/vendor/llama.cpp   # vocab and gguf-py for the synthetic models
[ -d "$TREE" ] || { mkdir -p /root/llama-tree && tar -xzf .carry/llama_cpp_python-0.3.36.tar.gz -C /root/llama-tree; }
{ nvidia-smi; nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.sm,clocks.mem --format=csv;
  nvcc --version; cmake --version | head -1; python3 --version; echo "nproc $(nproc)"; df -h /root; } > "$R/machine.txt" 2>&1
say "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) nproc=$(nproc)"

B=pypi:llama-cpp-python==0.3.36
P="python3 -m pinset"
J=$(nproc)
MOE=synth-qwen3moe-a3b
ARGS=(-- -p 512,2048 -n 128 -ngl 99)
step synth-iq1m 60 $P model synth --arch qwen3moe --size a3b --quant IQ1_M --direct --llama-tree "$TREE" -t "$J" \
  -o "$M" --name $MOE --json "$R/model-$MOE-IQ1_M.json"
step synth-iq1s 60 $P model synth --arch qwen3moe --size a3b --quant IQ1_S --direct --llama-tree "$TREE" -t "$J" \
  -o "$M" --name $MOE --json "$R/model-$MOE-IQ1_S.json"
IQ1M=$(ls "$M"/$MOE*IQ1_M*.gguf 2>/dev/null | head -1); IQ1S=$(ls "$M"/$MOE*IQ1_S*.gguf 2>/dev/null | head -1)
ls -la "$M" >> "$R/run.log"
# the base and head CUDA builds (cached in the pinset cache) with two short rounds, so that the benches below
# spend their --max-time on rounds, not on compiling
step build 420 $P bench -c pins.yaml --build $B -j "$J" -m "$IQ1M" -r 1 --rounds 2 --json "$R/build-check.json" \
  --log-dir "$L/build-check" -- -p 32 -n 0 -ngl 99
# adaptive rounds until every row is decisive (--max-time leaves room for the round in flight and the write)
step bench-head-vs-base 240 $P bench -c pins.yaml --build $B -j "$J" -m "$IQ1M" -r 3 --max-time "$(maxt 70)" \
  --json "$R/bench-head-vs-base.json" --markdown "$R/bench-head-vs-base.md" --csv "$R/bench-head-vs-base.csv" \
  --plot "$R/bench-head-vs-base.png" --log-dir "$L/bench-head-vs-base" "${ARGS[@]}"
step bench-aa 120 $P bench -c pins.yaml --build $B -j "$J" -m "$IQ1M" -r 3 --aa --max-time "$(maxt 60)" \
  --json "$R/bench-aa.json" --markdown "$R/bench-aa.md" --csv "$R/bench-aa.csv" --log-dir "$L/bench-aa" "${ARGS[@]}"
step bench-vs-iq1s 120 $P bench -c pins.yaml --build $B -j "$J" -m "$IQ1M" --vs-model "$IQ1S" -r 3 --max-time "$(maxt 60)" \
  --json "$R/bench-vs-iq1s.json" --markdown "$R/bench-vs-iq1s.md" --csv "$R/bench-vs-iq1s.csv" \
  --log-dir "$L/bench-vs-iq1s" "${ARGS[@]}"
say "done"
pack
exit 0
