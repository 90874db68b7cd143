#!/usr/bin/env bash
# The H200 proof of pinset in one device call (the session's device time allows one):
#   1. pinset verify --cuda   on the newest offline build with the repo's pin set (CPU gate, CUDA build,
#                             test-chat, test-backend-ops per op, feature checks)
#   2. pinset model synth     a Qwen3-30B-A3B-shaped 4-layer MoE (128 x 8 experts), IQ1_M, via the bare build's tools
#   3. pinset kld             base vs head CUDA path against the CPU reference
#   4. pinset bench           interleaved base/head llama-bench
#   5. IQ1_S of the same model (same F16 + imatrix) benched base vs head, for the IQ1_M-vs-IQ1_S comparison
#   6. test-backend-ops perf of the MoE cases (IQ1_M and IQ1_S) twice more with the head build, for their spread
#   7. a dense llama model (IQ1_M): synth + bench, if time is left
# Every step runs under a deadline (LIMIT s after start) and the results are packed into $OUT after each
# step, so whatever finished comes back even if a later step is cut.
# usage (repo root on the device; carry .carry and .whl):  bash reports/h200/run_all.sh
# RESUME=1 in a second call on the still-warm machine skips the steps that already ended (exit 0 or 1) there
# and runs the rest; ONLY="name ..." runs just those steps; MOE_ROUNDS sets the number of perf-moe-repeat
# rounds (default 2).
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/h200-out}
LIMIT=${LIMIT:-580}
T0=$(date +%s)
R=/tmp/h200/results; L=/tmp/h200/logs; M=/root/models
mkdir -p "$OUT" "$R" "$L" "$M"
left() { echo $(( LIMIT - ($(date +%s) - T0) )); }
say() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$R/run.log"; }
pack() { tar -czf "$OUT/results.tgz" -C /tmp/h200 results 2>/dev/null; tar -czf "$OUT/logs.tgz" -C /tmp/h200 logs 2>/dev/null; }
# step NAME NEED_S CMD...: run CMD if at least NEED_S seconds are left, interrupt it at the deadline
# (or after STEP_MAX seconds when that is set).
step() {
  local name=$1 need=$2; shift 2
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return 0; fi
  if [ -n "${RESUME:-}" ] && grep -Eq "END $name exit [01]\$" "$R/run.log" 2>/dev/null; then
    say "DONE $name (earlier call)"; return 0; fi
  if [ "$(left)" -lt "$need" ]; then say "SKIP $name: $(left) s left, needs ~$need s"; return 1; fi
  local cap=$(( $(left) - 5 ))
  if [ -n "${STEP_MAX:-}" ] && [ "$STEP_MAX" -lt "$cap" ]; then cap=$STEP_MAX; fi
  say "START $name (at most $cap s): $*"
  timeout -s INT -k 10 "$cap" "$@" > "$L/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$L/$name.log"
  say "END $name exit $rc"
  pack
  return $rc
}

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > "$L/setup.log" 2>&1 \
  || say "wheel install failed (see setup.log)"
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export PINSET_CACHE=/root/pinset-cache CCACHE_DIR=/root/ccache
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}   # one H200, also on a machine with more (no layer split)
mkdir -p "$PINSET_CACHE/downloads"
cp .carry/llama_cpp_python-0.3.36.tar.gz "$PINSET_CACHE/downloads/"   # trimmed sdist (scripts/device_carry.py)
{ nvidia-smi; nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.sm,clocks.mem --format=csv;
  nvcc --version; c++ --version | head -1; cmake --version | head -1; echo "ninja $(ninja --version)";
  echo "ccache: $(command -v ccache) $(ccache --version 2>/dev/null | head -1)"; git --version; python3 --version; echo "nproc $(nproc)"; } > "$R/machine.txt" 2>&1
say "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) nproc=$(nproc)"

B=pypi:llama-cpp-python==0.3.36
P="python3 -m pinset"
J=$(nproc)
step sim 30 $P sim --builds $B --json "$R/sim.json" --markdown "$R/sim.md"
STEP_MAX=$(( 400 - ($(date +%s) - T0) )) step verify 200 $P verify --builds $B --cuda -j "$J" --op-jobs 4 --no-progress \
  --json "$R/verify-h200.json" --markdown "$R/verify-h200.md" --logs "$L/verify"
MOE=synth-qwen3moe-a3b-4l
step synth-moe 120 $P model synth --arch qwen3moe --size a3b-4l --quant IQ1_M -c pins.yaml --build $B --cuda -j "$J" \
  -ngl 99 -t "$J" -o "$M" --name $MOE --json "$R/model-$MOE-IQ1_M.json"
step kld-moe 60 $P kld -c pins.yaml --build $B -j "$J" -m "$M/$MOE-IQ1_M.gguf" --ctx 512 --chunks 8 -t "$J" \
  --json "$R/kld-$MOE-IQ1_M.json" --markdown "$R/kld-$MOE-IQ1_M.md" --log-dir "$L/kld-moe"
step bench-moe 60 $P bench -c pins.yaml --build $B -j "$J" -m "$M/$MOE-IQ1_M.gguf" --rounds 5 -r 3 \
  --json "$R/bench-$MOE-IQ1_M.json" --markdown "$R/bench-$MOE-IQ1_M.md" --plot "$R/bench-$MOE-IQ1_M.png" \
  --log-dir "$L/bench-moe" -- -p 512,2048 -n 128 -ub 512,2048 -b 2048 -ngl 99
QUANTIZE=$(find "$PINSET_CACHE/builds" -path '*/build/bin/llama-quantize' | head -1)
step quant-moe-iq1s 40 "$QUANTIZE" --imatrix "$M/$MOE.imatrix.gguf" "$M/$MOE-F16.gguf" "$M/$MOE-IQ1_S.gguf" IQ1_S "$J"
step bench-moe-iq1s 50 $P bench -c pins.yaml --build $B -j "$J" -m "$M/$MOE-IQ1_S.gguf" --rounds 4 -r 3 \
  --json "$R/bench-$MOE-IQ1_S.json" --markdown "$R/bench-$MOE-IQ1_S.md" --plot "$R/bench-$MOE-IQ1_S.png" \
  --log-dir "$L/bench-moe-iq1s" -- -p 512,2048 -n 128 -ub 512,2048 -b 2048 -ngl 99
# IQ1_M against IQ1_S of the same weights on the head build, interleaved in one run (the goal "pp512 within 10 %
# of IQ1_S"); many short rounds, as a pp512 of this 4-layer model takes ~8 ms and its speed moves per process.
step bench-moe-vs-iq1s 120 $P bench -c pins.yaml --build $B -j "$J" -m "$M/$MOE-IQ1_M.gguf" --vs-model "$M/$MOE-IQ1_S.gguf" \
  --rounds 13 -r 5 --json "$R/bench-$MOE-IQ1_M-vs-IQ1_S.json" --markdown "$R/bench-$MOE-IQ1_M-vs-IQ1_S.md" \
  --plot "$R/bench-$MOE-IQ1_M-vs-IQ1_S.png" --log-dir "$L/bench-moe-vs-iq1s" -- -p 512,2048 -n 0 -ub 512,2048 -b 2048 -ngl 99
# The MoE perf cases of test-backend-ops once more, from the head CUDA build that verify made (the series applied):
# IQ1_M and IQ1_S in the same binary, two rounds, for the run-to-run spread of the IQ1_M/IQ1_S ratio.
MOE_RE='type_a=iq1_[ms],type_b=f32,n_mats=128,n_used=8,b=0,m=768,n=[0-9]+,k=2048'
TBO=
for b in $(find "$PINSET_CACHE/builds" -path '*/build/bin/test-backend-ops'); do
  r=${b%/build/bin/test-backend-ops}
  [ -f "$r/src/ggml/src/ggml-cuda/template-instances/mmq-instance-iq1_m.cu" ] && grep -q "GGML_CUDA:BOOL=ON" "$r/build/CMakeCache.txt" && TBO=$b
done
ROUNDS=${MOE_ROUNDS:-2}
[ -n "$TBO" ] && step perf-moe-repeat $(( 35 * ROUNDS )) bash -c 'for r in $(seq "$2"); do echo "### RUN head-r$r head"; "$0" perf -b CUDA0 -o MUL_MAT_ID -p "$1"; echo "### END head-r$r"; done' "$TBO" "$MOE_RE" "$ROUNDS"
DENSE=synth-llama-1b-4l
step synth-dense 60 $P model synth --arch llama --size 1b-4l --vocab qwen2 --quant IQ1_M -c pins.yaml --build $B --cuda \
  -j "$J" -ngl 99 -t "$J" -o "$M" --name $DENSE --json "$R/model-$DENSE-IQ1_M.json"
step bench-dense 45 $P bench -c pins.yaml --build $B -j "$J" -m "$M/$DENSE-IQ1_M.gguf" --rounds 4 -r 3 \
  --json "$R/bench-$DENSE-IQ1_M.json" --markdown "$R/bench-$DENSE-IQ1_M.md" --plot "$R/bench-$DENSE-IQ1_M.png" \
  --log-dir "$L/bench-dense" -- -p 512,2048 -n 128 -ub 512,2048 -b 2048 -ngl 99
step kld-dense 40 $P kld -c pins.yaml --build $B -j "$J" -m "$M/$DENSE-IQ1_M.gguf" --ctx 512 --chunks 8 -t "$J" \
  --json "$R/kld-$DENSE-IQ1_M.json" --markdown "$R/kld-$DENSE-IQ1_M.md" --log-dir "$L/kld-dense"
ccache -s > "$R/ccache.txt" 2>&1
say "done"
pack
exit 0
