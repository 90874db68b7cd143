#!/usr/bin/env bash
# H200 device run for issue 6 (patches/cuda-mmq-iq1m, IQ1_M in MMQ), self-contained (the machine starts bare).
#
# Builds llama.cpp 0c1e570 from .carry/llama-base.tar.xz (a trimmed copy of the vendored tree) twice:
#   base = 0c1e570 + 0002 (the test patch only, so base and head have the same test and perf cases)
#   head = 0c1e570 + 0001 + 0002 (+ 0003)
# If patches/cuda-mmq-iq1m has no 0003, the dense IQ1_M cut-over is derived from this run's sweep (find_cut.py on
# base vs head), put into 0003-dispatch-template.diff and built/measured as "head3"; the committed 0003 carries
# the same number.
# Runs: head correctness (test -b CUDA0 -o MUL_MAT and -o MUL_MAT_ID, the whole sets with the new cases),
# the perf sweep base vs head in the same run (dense m=4096 k=14336 and MoE 128x8 m=768 k=2048, IQ1_M and IQ1_S),
# then the final head's MUL_MAT set, and a second base sweep for the A/A noise if time is left.
# Device-only change: test-backend-ops' perf loop runs >= 0.5 s per case instead of >= 1 s (both binaries).
#
# RECUT=1: ignore a committed 0003 and derive the cut from this run's sweep again (after a kernel change).
# TOOLS_BUILD=0: skip building llama-bench/perplexity/quantize/imatrix (end to end runs elsewhere).
#
# MODE=final (second call): only the head with the committed 0001+0002+0003 is built; its whole MUL_MAT and
# MUL_MAT_ID sets are run (test-*-final.log), then a head perf sweep if time is left.
#
# usage (repo root, on the device): [MODE=final] bash reports/cuda-mmq-iq1m/run_h200.sh      output: $OUT
set -uo pipefail

REPO=$(pwd)
PD=$REPO/patches/cuda-mmq-iq1m
RD=$REPO/reports/cuda-mmq-iq1m
OUT=${OUT:-/tmp/iq1m-out}
W=${W:-/root/iq1m}
BUDGET=${BUDGET:-560}          # seconds: optional phases are skipped when they would end later than this
NJ=$(nproc)
mkdir -p "$OUT"
rm -rf "$W" && mkdir -p "$W"
T0=$(date +%s)
el()   { echo $(( $(date +%s) - T0 )); }
log()  { echo "[$(el)s] $*" | tee -a "$OUT/run.log"; }
fits() { [ $(( $(el) + $1 )) -le "$BUDGET" ]; }   # fits <seconds>: is there time for a phase of that length?

log "start $(date -u) on $(hostname), nproc=$NJ"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> "$OUT/run.log" 2>&1
nvcc --version | tail -1 >> "$OUT/run.log" 2>&1

apply_patch() { # apply_patch <file>: git apply, else patch -p1 (format-patch files work with both)
    if command -v git > /dev/null && git apply --whitespace=nowarn "$1" >> "$OUT/run.log" 2>&1; then
        log "applied (git apply) $(basename "$1")"
    elif patch -p1 --forward < "$1" >> "$OUT/run.log" 2>&1; then
        log "applied (patch -p1) $(basename "$1")"
    else
        log "FAILED to apply $(basename "$1")"; exit 1
    fi
}

TOOLS="llama-bench llama-perplexity llama-quantize llama-imatrix"
build() { # build <label> [extra targets]: (re)configure, build test-backend-ops (+ targets), copy it to $W/tbo-<label>
    local t=$(el)
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF -DGGML_CUDA_FA=OFF \
        -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
        > "$W/cmake-$1.log" 2>&1 || { tail -30 "$W/cmake-$1.log" >> "$OUT/run.log"; log "cmake FAILED ($1)"; exit 1; }
    if ! ninja -C build -j "$NJ" test-backend-ops ${2:-} > "$W/build-$1.log" 2>&1; then
        grep -B2 -A20 -m3 "error" "$W/build-$1.log" >> "$OUT/run.log"; tail -20 "$W/build-$1.log" >> "$OUT/run.log"
        log "build FAILED ($1)"; exit 1
    fi
    cp build/bin/test-backend-ops "$W/tbo-$1"
    log "built $1 in $(( $(el) - t ))s: $(grep -c 'Building' "$W/build-$1.log") objects compiled"
}

run_test() { # run_test <bin label> <op> <log name>
    local t=$(el)
    "$W/tbo-$1" test -b CUDA0 -o "$2" -j 4 > "$OUT/$3" 2>&1
    local rc=$?
    log "test $2 ($1) rc=$rc in $(( $(el) - t ))s: $(grep -E 'tests passed' "$OUT/$3" | tail -1 | xargs) | $(sed 's/\x1b\[[0-9;]*m//g' "$OUT/$3" | grep -c 'Backend CUDA0: OK') x 'Backend CUDA0: OK'"
    grep -E "FAIL|ERR =" "$OUT/$3" | head -20 >> "$OUT/run.log"
}

PM_N='1|2|4|8|9|16|24|32|48|64|80|96|112|128|160|192|224|256|320|384|448|512'   # IQ1_M dense: + the crossover range
PS_N='1|2|4|8|9|16|32|64|96|128|256|512'                                         # the issue's list
DENSE_RE="type_a=(iq1_m,type_b=f32,m=4096,n=($PM_N)|iq1_s,type_b=f32,m=4096,n=($PS_N)),k=14336,bs=\[1,1\]"
DENSE_M_RE="type_a=iq1_m,type_b=f32,m=4096,n=($PM_N),k=14336,bs=\[1,1\]"
MOE_RE='type_a=iq1_[ms],type_b=f32,n_mats=128,n_used=8,b=0,m=768,n=[0-9]+,k=2048'

run_perf() { # run_perf <run label> <bin label> <dense regex or -> <moe regex or ->
    local t=$(el)
    echo "### RUN $1 $2" >> "$OUT/perf.log"
    [ "$3" != "-" ] && "$W/tbo-$2" perf -b CUDA0 -o MUL_MAT    -p "$3" >> "$OUT/perf.log" 2>&1
    [ "$4" != "-" ] && "$W/tbo-$2" perf -b CUDA0 -o MUL_MAT_ID -p "$4" >> "$OUT/perf.log" 2>&1
    echo "### END $1" >> "$OUT/perf.log"
    log "perf $1 ($2) in $(( $(el) - t ))s"
}

# ---------------------------------------------------------------- sources
tar -xJf "$REPO/.carry/llama-base.tar.xz" -C "$W" 2>> "$OUT/run.log" \
    || python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$REPO/.carry/llama-base.tar.xz" "$W" \
    || { log "cannot extract the source tarball"; exit 1; }
log "sources extracted"
cd "$W/llama.cpp" || exit 1
git init -q . 2> /dev/null && git add -A > /dev/null 2>&1 && git -c user.name=x -c user.email=x@x commit -qm base > /dev/null 2>&1
P1=$(ls "$PD"/0001-*.patch); P2=$(ls "$PD"/0002-*.patch); P3=$(ls "$PD"/0003-*.patch 2> /dev/null || true)
[ "${RECUT:-0}" = 1 ] && [ "${MODE:-full}" != final ] && { log "RECUT=1: the cut is derived from this run, committed 0003 not used"; P3=; }
[ "${TOOLS_BUILD:-1}" = 0 ] && TOOLS=

# ---------------------------------------------------------------- base (+ tests) and head builds
apply_patch "$P2"
if [ "${MODE:-full}" = final ]; then
    sed -i 's|} while (total_time_us < 1000\*1000); // run for at least 1 second|} while (total_time_us < 500*1000); // device run: at least 0.5 s|' tests/test-backend-ops.cpp
    apply_patch "$P1"
    [ -n "$P3" ] || { log "MODE=final needs 0003"; exit 1; }
    apply_patch "$P3"
    build head3
    run_test head3 MUL_MAT    test-MUL_MAT-final.log
    run_test head3 MUL_MAT_ID test-MUL_MAT_ID-final.log
    fits 70 && run_perf head3-c head3 "$DENSE_RE" "$MOE_RE"
    log "done (MODE=final)"
    grep -E "^\[" "$OUT/run.log" | tail -20
    exit 0
fi
sed -i 's|} while (total_time_us < 1000\*1000); // run for at least 1 second|} while (total_time_us < 500*1000); // device run: at least 0.5 s|' tests/test-backend-ops.cpp
grep -q 'total_time_us < 500\*1000' tests/test-backend-ops.cpp && log "perf loop: >= 0.5 s per case" || log "WARN: perf loop sed did not apply"
build base "$TOOLS"      # the tools' own objects are built once here; later builds relink them
apply_patch "$P1"
build head

# ---------------------------------------------------------------- correctness (head, whole MUL_MAT / MUL_MAT_ID sets)
run_test head MUL_MAT    test-MUL_MAT.log
run_test head MUL_MAT_ID test-MUL_MAT_ID.log

# ---------------------------------------------------------------- perf sweep, base vs head in the same run
run_perf base-a base "$DENSE_RE" "$MOE_RE"
run_perf head-a head "$DENSE_RE" "$MOE_RE"

# ---------------------------------------------------------------- 0003: dense IQ1_M cut-over
FINAL=head
if [ -n "$P3" ]; then
    apply_patch "$P3"
else
    python3 "$RD/find_cut.py" "$OUT/perf.log" base-a head-a | tee -a "$OUT/run.log"
    CUT=$(python3 "$RD/find_cut.py" "$OUT/perf.log" base-a head-a | sed -n 's/^CUT=//p')
    if [ -n "$CUT" ] && [ "$CUT" != "none" ]; then
        sed "s/@CUT@/$CUT/" "$RD/0003-dispatch-template.diff" > "$W/0003.diff"
        apply_patch "$W/0003.diff"
        echo "--- 0003 as applied on the device:" >> "$OUT/run.log"; cat "$W/0003.diff" >> "$OUT/run.log"
        P3=$W/0003.diff
    fi
fi
if [ -n "$P3" ]; then
    build head3
    FINAL=head3
    run_perf head3-a head3 "$DENSE_M_RE" -
    fits 60 && run_test head3 MUL_MAT test-MUL_MAT-final.log
    fits 120 && run_test head3 MUL_MAT_ID test-MUL_MAT_ID-final.log
fi
# the tools of the patched tree (final head): only relinks, their objects come from the base build
if [ -z "$TOOLS" ]; then
    log "tools not built (TOOLS_BUILD=0)"
elif ninja -C build -j "$NJ" $TOOLS > "$W/build-tools.log" 2>&1; then
    log "tools built with the series ($FINAL): $(cd build/bin && ls $TOOLS | xargs)"
else
    grep -B2 -A10 -m3 "error" "$W/build-tools.log" >> "$OUT/run.log"; log "tools build FAILED"
fi

# ---------------------------------------------------------------- A/A: base again (and the final head again)
fits 75 && run_perf base-b base "$DENSE_RE" "$MOE_RE"
fits 75 && run_perf "$FINAL-b" "$FINAL" "$DENSE_RE" "$MOE_RE"

log "done (final head: $FINAL)"
grep -E "^\[" "$OUT/run.log" | tail -40
