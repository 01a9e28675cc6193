#!/usr/bin/env bash
# Configures and builds the CUDA backend into build-cuda/ (nvcc, cuBLASLt and
# NCCL of the CUDA toolkit in /usr/local/cuda; Hopper, sm_90, unless
# CMAKE_CUDA_ARCHITECTURES says otherwise). Portable host code (-DMT_NATIVE=OFF):
# the binary runs on the GPU machine's CPU, not only on this one.
# Builds `megatron`, the CUDA tests and the CPU kernel tests (their CPU twins;
# MT_CUDA_TARGETS overrides); extra
# arguments go to CMake. With -DMT_NATIVE=ON (what scripts/test.sh passes)
# every folder but src/backend and src/kernels compiles exactly as in build/,
# and ccache hands those objects over instead of compiling them again.
set -euo pipefail
cd "$(dirname "$0")/.."
nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
[ -x "$nvcc" ] || { echo "build_cuda: no nvcc at $nvcc; fix: install the CUDA toolkit or set CUDACXX" >&2; exit 1; }
source scripts/ccache_flags.sh
cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DMT_CUDA=ON -DMT_NATIVE=OFF \
      -DCMAKE_CUDA_COMPILER="$nvcc" "${MT_CCACHE_FLAGS[@]}" "$@" >/dev/null
cmake --build build-cuda -j"$(nproc)" --target ${MT_CUDA_TARGETS:-megatron kernels_cuda_tests kernels_tests}
echo "build_cuda: ok (build-cuda/megatron, build-cuda/tests/kernels_cuda_tests)"
