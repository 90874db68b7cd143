#!/usr/bin/env bash
# H200 run for issue 3: `pinset verify --cuda` on the newest offline build with the repo's pin set.
#
# usage (repo root, on the device; carry .carry and .whl):  bash reports/verify/run_h200.sh      output: $OUT
#   VERIFY_ARGS="--cuda-flags=-DGGML_CUDA_FA=OFF"  extra verify arguments (e.g. a lighter CUDA build)
#   LIMIT=560                                       seconds before verify is interrupted (SIGINT stops ninja too)
# The cache (build/pinset-cache, git-ignored) stays on the machine while it is warm: if a call hits the limit
# during a build, run the script again and ninja continues where it stopped; finished builds are no-ops.
# Comes back in $OUT (at most 8 files): h200.json, h200.md, verify.log, nvidia-smi-h200.csv, toolchain.txt,
# logs.tar.gz (every gate's program output and the configure/build logs).
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/verify-out}
LIMIT=${LIMIT:-560}
mkdir -p "$OUT"
T0=$(date +%s)

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > "$OUT/toolchain.txt" 2>&1 || echo "pip install of .whl failed" >> "$OUT/toolchain.txt"
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH
export PINSET_CACHE=$PWD/build/pinset-cache
mkdir -p "$PINSET_CACHE/downloads"
SDIST=llama_cpp_python-0.3.36.tar.gz      # the trimmed sdist of .carry (vendor/llama.cpp at 0c1e57098 + CHANGELOG)
[ -f "$PINSET_CACHE/downloads/$SDIST" ] || cp ".carry/$SDIST" "$PINSET_CACHE/downloads/" >> "$OUT/toolchain.txt" 2>&1

# provenance captures (nvidia-smi-h200.csv is also a parser fixture: tests/fixtures/verify/)
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader,nounits > "$OUT/nvidia-smi-h200.csv" 2>&1
{ nvcc --version; c++ --version; cmake --version; echo "ninja $(ninja --version)"; echo "git: $(git --version)";
  echo "ccache: $(command -v ccache)"; echo "python: $(python3 --version)"; echo "nproc $(nproc)"; } >> "$OUT/toolchain.txt" 2>&1

timeout -s INT "$LIMIT" python3 -m pinset verify -c pins.yaml --builds pypi:llama-cpp-python==0.3.36 --cuda \
    -j "$(nproc)" --op-jobs 4 --no-progress \
    --json "$OUT/h200.json" --markdown "$OUT/h200.md" --logs /tmp/verify-logs ${VERIFY_ARGS:-} 2>&1 | tee "$OUT/verify.log"
RC=${PIPESTATUS[0]}
echo "pinset verify exit $RC after $(( $(date +%s) - T0 )) s (130: interrupted at the limit: run again)" | tee -a "$OUT/verify.log"
tar -czf "$OUT/logs.tar.gz" -C /tmp verify-logs 2> /dev/null
exit 0
