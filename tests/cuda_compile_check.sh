#!/usr/bin/env bash
# Compile check, no GPU needed, of the translation units that patches/cuda-mmq-iq1m touches, for sm_90 with nvcc,
# through llama.cpp's own CMake + Ninja (object targets only: nothing is linked).
#
# usage: tests/cuda_compile_check.sh LLAMA_CPP_DIR [OBJECT_SUFFIX ...]
#   LLAMA_CPP_DIR  a llama.cpp tree with the series applied (e.g. 0c1e570 + git am -3 patches/cuda-mmq-iq1m/*)
#   OBJECT_SUFFIX  object targets to build instead of the default list, matched against the ends of the names of
#                  `ninja -t targets all`, e.g. template-instances/mmq-instance-q4_0.cu.o; 'all-mmq' = every MMQ TU
# env: BUILD_DIR (default: a temporary folder, removed at exit unless KEEP_BUILD=1), JOBS (default: nproc),
#      CUDA_ARCH (default 90), NVCC (default: nvcc on PATH)
# Needs cmake, ninja, a C/C++ compiler and nvcc (CUDA 12/13). Where the CUDA toolkit has no cuBLAS headers (a
# pip-assembled toolkit), they are taken from an nvidia-cublas wheel (a local copy under /opt, else pip download);
# libraries that are not there are replaced by empty stubs, which is enough since nothing is linked.
# Exit status: 0 when every object compiled, non-zero otherwise.
set -euo pipefail

if [ $# -lt 1 ] || [ ! -f "$1/ggml/src/ggml-cuda/mmq.cu" ]; then
    echo "usage: $0 LLAMA_CPP_DIR [OBJECT_SUFFIX ...]   (LLAMA_CPP_DIR must be a llama.cpp tree)" >&2
    exit 2
fi
SRC=$(cd "$1" && pwd)
shift
JOBS=${JOBS:-$(nproc)}
ARCH=${CUDA_ARCH:-90}
NVCC=${NVCC:-$(command -v nvcc || true)}
[ -n "$NVCC" ] || { echo "cuda_compile_check: nvcc not found" >&2; exit 2; }
for tool in cmake ninja; do
    command -v $tool > /dev/null || { echo "cuda_compile_check: $tool not found" >&2; exit 2; }
done

T0=$(date +%s)
TMP=$(mktemp -d)
BUILD=${BUILD_DIR:-$TMP/build}
cleanup() { [ "${KEEP_BUILD:-0}" = 1 ] || rm -rf "$TMP"; }
trap cleanup EXIT

CUDA_DIR=${NVCC_OVERRIDE_CUDA_DIR:-}
# nvcc may be a wrapper script: ask it where its toolkit is
if [ -z "$CUDA_DIR" ]; then
    : > "$TMP/e.cu"
    CUDA_DIR=$(cd "$TMP" && "$NVCC" --dryrun -c e.cu -o e.o 2>&1 | sed -n 's/^#\$ TOP=//p' | head -1)
    [ -n "$CUDA_DIR" ] && CUDA_DIR=$(cd "$CUDA_DIR" && pwd)
    [ -n "$CUDA_DIR" ] || CUDA_DIR=$(dirname "$(dirname "$(readlink -f "$NVCC")")")
fi
echo "cuda_compile_check: nvcc $("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p') ($NVCC, toolkit $CUDA_DIR), sm_$ARCH, tree $SRC"

EXTRA=()
CUDA_FLAGS=""
if ! ls "$CUDA_DIR"/include/cublas_v2.h "$CUDA_DIR"/targets/*/include/cublas_v2.h > /dev/null 2>&1; then
    WHL=$(ls /opt/*/files/nvidia_cublas-*.whl /opt/wheels/nvidia_cublas-*.whl 2> /dev/null | sort -V | tail -1 || true)
    if [ -z "$WHL" ]; then
        python3 -m pip download -q --no-deps --only-binary=:all: -d "$TMP/whl" nvidia-cublas > /dev/null 2>&1 || true
        WHL=$(ls "$TMP"/whl/nvidia_cublas-*.whl 2> /dev/null | tail -1 || true)
    fi
    [ -n "$WHL" ] || { echo "cuda_compile_check: no cuBLAS headers and no nvidia-cublas wheel" >&2; exit 2; }
    mkdir -p "$TMP/cublas/include"
    python3 - "$WHL" "$TMP/cublas/include" <<'EOF'
import sys, zipfile, os
with zipfile.ZipFile(sys.argv[1]) as z:
    for n in z.namelist():
        if '/include/' in n and n.endswith('.h'):
            with open(os.path.join(sys.argv[2], os.path.basename(n)), 'wb') as f:
                f.write(z.read(n))
EOF
    CUDA_FLAGS="-I$TMP/cublas/include"
    echo "cuda_compile_check: cuBLAS headers from $(basename "$WHL")"
fi
# imported targets that ggml-cuda links to: empty stubs for the libraries this toolkit does not have
STUB="$TMP/stub"
mkdir -p "$STUB"
echo 'void cuda_compile_check_stub(void) {}' > "$STUB/stub.c"
for lib in cublas cublasLt cuda_driver; do
    file=$lib; [ $lib = cuda_driver ] && file=cuda
    if ! ls "$CUDA_DIR"/lib64/lib$file.so* "$CUDA_DIR"/lib/lib$file.so* "$CUDA_DIR"/lib64/stubs/lib$file.so* \
            "$CUDA_DIR"/targets/*/lib/lib$file.so* "$CUDA_DIR"/targets/*/lib/stubs/lib$file.so* > /dev/null 2>&1; then
        [ -f "$STUB/lib$file.so" ] || cc -shared -fPIC "$STUB/stub.c" -o "$STUB/lib$file.so"
        EXTRA+=("-DCUDA_${lib}_LIBRARY=$STUB/lib$file.so")
    fi
done

cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DCMAKE_CUDA_COMPILER="$NVCC" -DGGML_NATIVE=OFF \
    -DGGML_CUDA_FA=OFF -DGGML_CCACHE=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    ${CUDA_FLAGS:+"-DCMAKE_CUDA_FLAGS=$CUDA_FLAGS"} ${EXTRA[@]+"${EXTRA[@]}"} > "$TMP/cmake.log" 2>&1 \
    || { tail -40 "$TMP/cmake.log" >&2; echo "cuda_compile_check: cmake configure FAILED" >&2; exit 1; }

# generated instance files must match generate_cu_files.py
GEN="$TMP/gen"
cp -r "$SRC/ggml/src/ggml-cuda/template-instances" "$GEN"
(cd "$GEN" && python3 generate_cu_files.py)
if ! diff -r -q "$GEN" "$SRC/ggml/src/ggml-cuda/template-instances" > "$TMP/gen.diff"; then
    cat "$TMP/gen.diff" >&2
    echo "cuda_compile_check: template-instances differ from generate_cu_files.py output" >&2
    exit 1
fi

# default: the TUs the series touches (mmq.cu and the IQ1_M MMQ instance; quantize.cu uses the q8_1 layout switch
# in mmq.cuh; test-backend-ops.cpp holds the new tests)
WANT=("$@")
if [ ${#WANT[@]} -eq 0 ]; then
    WANT=(ggml-cuda.dir/mmq.cu.o template-instances/mmq-instance-iq1_m.cu.o ggml-cuda.dir/quantize.cu.o
          test-backend-ops.dir/test-backend-ops.cpp.o)
fi
ninja -C "$BUILD" -t targets all | sed -n 's/^\([^ :]*\.o\): .*/\1/p' | sort -u > "$TMP/objects"
OBJS=()
for w in "${WANT[@]}"; do
    if [ "$w" = all-mmq ]; then
        mapfile -t -O ${#OBJS[@]} OBJS < <(grep -E 'ggml-cuda\.dir/(mmq\.cu\.o|template-instances/mmq-instance-.*\.cu\.o)$' "$TMP/objects")
        continue
    fi
    o=$(grep -E "(^|/)${w//./\\.}\$" "$TMP/objects" | head -1 || true)
    [ -n "$o" ] || { echo "cuda_compile_check: no object target matches '$w'" >&2; exit 1; }
    OBJS+=("$o")
done
[ -f "$SRC/ggml/src/ggml-cuda/template-instances/mmq-instance-iq1_m.cu" ] \
    || echo "cuda_compile_check: WARNING: no mmq-instance-iq1_m.cu, is the series applied?" >&2

echo "cuda_compile_check: compiling ${#OBJS[@]} objects with -j$JOBS:"
printf '  %s\n' "${OBJS[@]}"
if ! ninja -C "$BUILD" -j "$JOBS" "${OBJS[@]}" > "$TMP/ninja.log" 2>&1; then
    grep -E -A15 "error|FAILED" "$TMP/ninja.log" | head -80 >&2
    echo "cuda_compile_check: FAILED after $(( $(date +%s) - T0 ))s" >&2
    exit 1
fi
grep -i "warning" "$TMP/ninja.log" | grep -v "^-- " | head -20 || true
for o in "${OBJS[@]}"; do
    [ -s "$BUILD/$o" ] || { echo "cuda_compile_check: $o missing after the build" >&2; exit 1; }
done
echo "cuda_compile_check: OK, ${#OBJS[@]} objects compiled for sm_$ARCH in $(( $(date +%s) - T0 ))s"
