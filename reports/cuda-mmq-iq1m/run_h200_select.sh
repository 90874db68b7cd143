#!/usr/bin/env bash
# H200 device run for issue 6 that picks the IQ1_M vec-dot epilogue on the device and then proves the chosen head.
# All candidates give bit-identical results (the same exact int32 sum C0*m0 + C1*m1 per 32 values, converted exactly):
#   e0 = committed 0001: two IMAD, float conversion by adding 1.5*2^23 (FADD)
#   e1 = C0 and C1 packed as int16 pairs (one PRMT) and weighted with one dp2a (IDP.2A), same FADD conversion
#   e2 = as e1, conversion with I2FP
# Why: ncu (variants/call2) shows the MoE cases n <= 128 run J = n tiles at one block per SM, where the epilogue's
# two IMAD per accumulator element and 32 values (half-rate FMA-heavy pipe) are the largest difference to IQ1_S.
# Flow: base = 0c1e570 + 0002 (test patch only); head = + 0001 + 0003 (committed) + variants/vecdot.diff (the
# candidates behind GGML_CUDA_IQ1_M_VD, default e0); e1/e2 rebuild only mmq-instance-iq1_m.cu with the macro at its
# top. IQ1_M test cases of each candidate, 2 interleaved rounds of MoE perf cases (select.log), the fastest
# candidate by geometric mean of IQ1_M MoE time is "head"; then its whole MUL_MAT and MUL_MAT_ID sets, the perf
# sweep base-a / head-a (perf.log, same regexes as run_h200.sh) and base-b (A/A) if time is left.
# variants/vecdot.diff is written against the 0001 of call1 (two-IMAD epilogue); the committed 0001 is candidate e1,
# so the script reproduces call2 from the commit that added it (before 0001 took e1), not from later patches.
# usage (repo root, on the device): bash reports/cuda-mmq-iq1m/run_h200_select.sh      output: $OUT
set -uo pipefail
REPO=$(pwd)
PD=$REPO/patches/cuda-mmq-iq1m
RD=$REPO/reports/cuda-mmq-iq1m
OUT=${OUT:-/tmp/iq1m-out}
W=${W:-/root/iq1m}
BUDGET=${BUDGET:-560}
CANDIDATES=${CANDIDATES:-0 1 2}
NJ=$(nproc)
mkdir -p "$OUT"; rm -rf "$W" && mkdir -p "$W"
T0=$(date +%s)
el()   { echo $(( $(date +%s) - T0 )); }
log()  { echo "[$(el)s] $*" | tee -a "$OUT/run.log"; }
fits() { [ $(( $(el) + $1 )) -le "$BUDGET" ]; }
log "start $(date -u) on $(hostname), nproc=$NJ"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> "$OUT/run.log" 2>&1
nvcc --version | tail -1 >> "$OUT/run.log" 2>&1

apply_patch() {
    if patch -p1 --forward < "$1" >> "$OUT/run.log" 2>&1; then log "applied $(basename "$1")"; else log "FAILED to apply $(basename "$1")"; exit 1; fi
}
build() { # build <label>: configure (again: 0001 adds a template instance that CMake globs), build test-backend-ops, copy it to $W/tbo-<label>
    local t=$(el)
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF -DGGML_CUDA_FA=OFF \
        -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
        > "$W/cmake.log" 2>&1 || { tail -30 "$W/cmake.log" >> "$OUT/run.log"; log "cmake FAILED"; exit 1; }
    if ! ninja -C build -j "$NJ" test-backend-ops > "$W/build-$1.log" 2>&1; then
        grep -B2 -A20 -m3 "error" "$W/build-$1.log" >> "$OUT/run.log"; log "build FAILED ($1)"; exit 1
    fi
    cp build/bin/test-backend-ops "$W/tbo-$1"
    log "built $1 in $(( $(el) - t ))s: $(grep -c 'Building' "$W/build-$1.log") objects compiled"
}
run_test() { # run_test <bin label> <op> <log name> [params regex]
    local t=$(el)
    "$W/tbo-$1" test -b CUDA0 -o "$2" ${4:+-p "$4"} -j 4 > "$OUT/$3" 2>&1
    local rc=$?
    log "test $2${4:+ ($4)} ($1) rc=$rc in $(( $(el) - t ))s: $(grep -E 'tests passed' "$OUT/$3" | tail -1 | xargs) | $(sed 's/\x1b\[[0-9;]*m//g' "$OUT/$3" | grep -c 'Backend CUDA0: OK') x 'Backend CUDA0: OK'"
    grep -E "FAIL|ERR =" "$OUT/$3" | head -20 >> "$OUT/run.log"
    return $rc
}
PM_N='1|2|4|8|9|16|24|32|48|64|80|96|112|128|160|192|224|256|320|384|448|512'
PS_N='1|2|4|8|9|16|32|64|96|128|256|512'
DENSE_RE="type_a=(iq1_m,type_b=f32,m=4096,n=($PM_N)|iq1_s,type_b=f32,m=4096,n=($PS_N)),k=14336,bs=\[1,1\]"
MOE_RE='type_a=iq1_[ms],type_b=f32,n_mats=128,n_used=8,b=0,m=768,n=[0-9]+,k=2048'
SEL_RE='type_a=iq1_[ms],type_b=f32,n_mats=128,n_used=8,b=0,m=768,n=(16|32|64|96|128|512),k=2048'
run_perf() { # run_perf <log> <run label> <bin label> <dense regex or -> <moe regex or ->
    local t=$(el)
    echo "### RUN $2 $3" >> "$OUT/$1"
    [ "$4" != "-" ] && "$W/tbo-$3" perf -b CUDA0 -o MUL_MAT    -p "$4" >> "$OUT/$1" 2>&1
    [ "$5" != "-" ] && "$W/tbo-$3" perf -b CUDA0 -o MUL_MAT_ID -p "$5" >> "$OUT/$1" 2>&1
    echo "### END $2" >> "$OUT/$1"
    log "perf $2 ($3) in $(( $(el) - t ))s"
}

tar -xJf "$REPO/.carry/llama-base.tar.xz" -C "$W" || { log "cannot extract"; exit 1; }
cd "$W/llama.cpp" || exit 1
log "sources extracted"
apply_patch "$(ls "$PD"/0002-*.patch)"
sed -i 's|} while (total_time_us < 1000\*1000); // run for at least 1 second|} while (total_time_us < 500*1000); // device run: at least 0.5 s|' tests/test-backend-ops.cpp
grep -q 'total_time_us < 500\*1000' tests/test-backend-ops.cpp && log "perf loop: >= 0.5 s per case" || log "WARN: perf loop sed did not apply"
build base
apply_patch "$(ls "$PD"/0001-*.patch)"
apply_patch "$(ls "$PD"/0003-*.patch)"
apply_patch "$RD/variants/vecdot.diff"
INST=ggml/src/ggml-cuda/template-instances/mmq-instance-iq1_m.cu
cp "$INST" "$W/inst.orig"
for e in $CANDIDATES; do
    { echo "#define GGML_CUDA_IQ1_M_VD $e"; cat "$W/inst.orig"; } > "$INST"
    build "e$e"
done
OKC=
for e in $CANDIDATES; do
    run_test "e$e" MUL_MAT    "test-MUL_MAT-iq1_m-e$e.log"    'type_a=iq1_m' && \
    run_test "e$e" MUL_MAT_ID "test-MUL_MAT_ID-iq1_m-e$e.log" 'type_a=iq1_m' && OKC="$OKC $e"
done
log "candidates passing their IQ1_M cases:$OKC"
read -ra CS <<< "$OKC"
[ ${#CS[@]} -gt 0 ] || { log "no candidate passed"; exit 1; }
for r in 1 2; do
    for (( k = 0; k < ${#CS[@]}; k++ )); do e=${CS[$(( (k + r - 1) % ${#CS[@]} ))]}; run_perf select.log "sel-r$r-e$e" "e$e" - "$SEL_RE"; done
done
BEST=$(RD="$RD" python3 -c "
import math, sys, collections
sys.path.insert(0, '$RD')
from perflog import read_perf
runs = read_perf('$OUT/select.log')
t = collections.defaultdict(list)
for label, res in runs.items():
    e = label.rsplit('-', 1)[1]
    for (shape, ty, n), us in res.items():
        if ty == 'iq1_m':
            t[e].append(math.log(us))
score = {e: math.exp(sum(v) / len(v)) for e, v in t.items()}
for e in sorted(score):
    print(f'{e}: geometric mean of IQ1_M MoE us over {len(t[e])} cases = {score[e]:.2f}', file=sys.stderr)
print(min(score, key=score.get))
" 2>> "$OUT/run.log")
log "selected head = $BEST"
cp "$W/tbo-$BEST" "$W/tbo-head"
run_test head MUL_MAT    test-MUL_MAT-final.log
run_test head MUL_MAT_ID test-MUL_MAT_ID-final.log
run_perf perf.log base-a base "$DENSE_RE" "$MOE_RE"
run_perf perf.log head-a head "$DENSE_RE" "$MOE_RE"
fits 65 && run_perf perf.log base-b base "$DENSE_RE" "$MOE_RE"
log "done (head = $BEST)"
grep -E "^\[" "$OUT/run.log" | tail -40
