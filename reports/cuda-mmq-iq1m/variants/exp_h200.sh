#!/usr/bin/env bash
# H200 experiment: IQ1_M MMQ variants in one run, measured interleaved against each other and IQ1_S.
# call1 (defaults: MACRO=GGML_CUDA_IQ1_M_LOADER DIFF=loaders.diff VARIANTS="0 1 2" ROUNDS=3), three loaders:
#   v0 = the committed 0001 loader (iq1s_grid_gpu + a delta-selected 3-byte prmt table + 2 reordering prmt per 8 values)
#   v1 = 4096-entry uint32 table of prmt selectors in value order, the delta sign folded into the index (2 prmt per 8)
#   v2 = 4096-entry uint64 table of the final int8 values 8*(g+delta) (one 8-byte load per 8 values, no prmt)
# call2 (MACRO=GGML_CUDA_IQ1_M_CFG DIFF=configs.diff VARIANTS="0 1 2 3" ROUNDS=2 NCU=1), mmq-config-ampere rows for IQ1_M:
#   v0 = committed (256 threads, I=128, occupancy 1: 114 registers at J=8, 2 blocks/SM)
#   v1 = J=8,16: 128 threads, I=64, occupancy 4      v2 = J=8: 256 threads, occupancy 3 (80 registers)
#   v3 = J=8: 128 threads, I=64, occupancy 6 (80 registers)
# Tree: 0c1e570 + 0002 + 0001 + 0003 (committed) + DIFF (the variants behind MACRO, default 0); the other variants
# rebuild only mmq-instance-iq1_m.cu with the macro defined at its top (IQ1_M's templates are instantiated only there).
# Runs: IQ1_M MUL_MAT and MUL_MAT_ID test cases of every variant (correctness), then 3 rounds of the MoE perf cases
# (IQ1_M and IQ1_S, 128x8 m=768 k=2048) with the variant order rotated per round, then the dense IQ1_M cases
# n=9..224 (MMQ side of 0003's cut) once per variant.
# usage (repo root, on the device): bash reports/cuda-mmq-iq1m/variants/exp_h200.sh      output: $OUT
set -uo pipefail
REPO=$(pwd)
PD=$REPO/patches/cuda-mmq-iq1m
XD=$REPO/reports/cuda-mmq-iq1m/variants
OUT=${OUT:-/tmp/iq1m-exp}
W=${W:-/root/iq1m-exp}
NJ=$(nproc)
MACRO=${MACRO:-GGML_CUDA_IQ1_M_LOADER}; DIFF=${DIFF:-loaders.diff}; VARIANTS=${VARIANTS:-0 1 2}; ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT"; rm -rf "$W" && mkdir -p "$W"
T0=$(date +%s)
el()  { echo $(( $(date +%s) - T0 )); }
log() { echo "[$(el)s] $*" | tee -a "$OUT/run.log"; }
log "start $(date -u) on $(hostname), nproc=$NJ"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> "$OUT/run.log" 2>&1

tar -xJf "$REPO/.carry/llama-base.tar.xz" -C "$W" || { log "cannot extract"; exit 1; }
cd "$W/llama.cpp" || exit 1
for p in "$PD"/0002-*.patch "$PD"/0001-*.patch "$PD"/0003-*.patch "$XD/$DIFF"; do
    patch -p1 --forward < "$p" >> "$OUT/run.log" 2>&1 && log "applied $(basename "$p")" || { log "FAILED to apply $p"; exit 1; }
done
sed -i 's|} while (total_time_us < 1000\*1000); // run for at least 1 second|} while (total_time_us < 500*1000); // device run: at least 0.5 s|' tests/test-backend-ops.cpp
grep -q 'total_time_us < 500\*1000' tests/test-backend-ops.cpp && log "perf loop: >= 0.5 s per case" || log "WARN: perf loop sed did not apply"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF \
    -DGGML_CUDA_FA=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    > "$W/cmake.log" 2>&1 || { tail -30 "$W/cmake.log" >> "$OUT/run.log"; log "cmake FAILED"; exit 1; }
INST=ggml/src/ggml-cuda/template-instances/mmq-instance-iq1_m.cu
cp "$INST" "$W/inst.orig"
for v in $VARIANTS; do
    t=$(el)
    { echo "#define $MACRO $v"; cat "$W/inst.orig"; } > "$INST"
    if ! ninja -C build -j "$NJ" test-backend-ops > "$W/build-v$v.log" 2>&1; then
        grep -B2 -A20 -m3 "error" "$W/build-v$v.log" >> "$OUT/run.log"; log "build FAILED (v$v)"; exit 1
    fi
    cp build/bin/test-backend-ops "$W/tbo-v$v"
    log "built v$v in $(( $(el) - t ))s: $(grep -c 'Building' "$W/build-v$v.log") objects compiled"
done

for v in $VARIANTS; do
    for op in MUL_MAT MUL_MAT_ID; do
        t=$(el)
        "$W/tbo-v$v" test -b CUDA0 -o $op -p 'type_a=iq1_m' -j 4 > "$OUT/test-$op-v$v.log" 2>&1
        rc=$?
        log "test $op iq1_m (v$v) rc=$rc in $(( $(el) - t ))s: $(grep -E 'tests passed' "$OUT/test-$op-v$v.log" | tail -1 | xargs) | $(sed 's/\x1b\[[0-9;]*m//g' "$OUT/test-$op-v$v.log" | grep -c 'Backend CUDA0: OK') x 'Backend CUDA0: OK'"
        grep -E "FAIL|ERR =" "$OUT/test-$op-v$v.log" | head -10 >> "$OUT/run.log"
    done
done

MOE_RE='type_a=iq1_[ms],type_b=f32,n_mats=128,n_used=8,b=0,m=768,n=(16|32|64|96|128|256|512),k=2048'
DENSE_M_RE='type_a=iq1_m,type_b=f32,m=4096,n=(9|16|32|64|96|128|160|192|224),k=14336,bs=\[1,1\]'
perf() { # perf <run label> <variant> <op> <regex>
    local t=$(el)
    echo "### RUN $1 v$2" >> "$OUT/perf.log"
    "$W/tbo-v$2" perf -b CUDA0 -o "$3" -p "$4" >> "$OUT/perf.log" 2>&1
    echo "### END $1" >> "$OUT/perf.log"
    log "perf $1 (v$2 $3) in $(( $(el) - t ))s"
}
read -ra VS <<< "$VARIANTS"
for (( r = 1; r <= ROUNDS; r++ )); do   # the variant order rotates by one per round
    for (( k = 0; k < ${#VS[@]}; k++ )); do v=${VS[$(( (k + r - 1) % ${#VS[@]} ))]}; perf "moe-r$r-v$v" "$v" MUL_MAT_ID "$MOE_RE"; done
done
for v in $VARIANTS; do perf "dense-v$v" "$v" MUL_MAT "$DENSE_M_RE"; done
if [ "${NCU:-0}" = 1 ]; then   # kernel-level view of v0: IQ1_M and IQ1_S MoE at n=32 and n=96
    NCU_BIN=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -1)
    if [ -n "$NCU_BIN" ]; then
        for ty in iq1_m iq1_s; do for n in 32 96; do
            t=$(el)
            timeout 60 "$NCU_BIN" -k regex:mul_mat_q --launch-skip 3 --launch-count 1 --section SpeedOfLight --section Occupancy \
                --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
                "$W/tbo-v0" perf -b CUDA0 -o MUL_MAT_ID -p "type_a=$ty,type_b=f32,n_mats=128,n_used=8,b=0,m=768,n=$n,k=2048" \
                > "$OUT/ncu-$ty-n$n.log" 2>&1
            log "ncu $ty n=$n rc=$? in $(( $(el) - t ))s"
        done; done
    else
        log "ncu not found"
    fi
fi
log "done"
grep -E "^\[" "$OUT/run.log" | tail -40
