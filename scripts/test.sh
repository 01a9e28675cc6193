#!/usr/bin/env bash
# Installs the dependencies, builds, and runs the whole test suite (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
source scripts/mpi_env.sh
# The CUDA backend compiles and links wherever the CUDA toolkit is (CI has no
# GPU: its CUDA tests report that they need one and count as skipped, and
# --device cuda must end with one line saying why; scripts/gpu_check.sh runs
# them on a GPU). It runs first, so the last CTest summary printed is the
# whole CPU suite's. Built for this CPU like build/ (the GPU bundle builds a
# portable one), so ccache serves it every object outside backend and kernels.
if [ -x "${CUDACXX:-/usr/local/cuda/bin/nvcc}" ]; then
  bash scripts/build_cuda.sh -DMT_NATIVE=ON
  (cd build-cuda && ctest -L cuda --output-on-failure --timeout 600)
  bash scripts/check_device_refusal.sh build-cuda/megatron
fi
(cd build && ctest --output-on-failure -j2 --timeout 600)
# The readers of untrusted files (indexed dataset, safetensors, meta.json)
# under libFuzzer + ASan + UBSan, 60 s of a core each, side by side (90 s on
# two cores; with the clang build of three libraries ~3.5 min).
# MT_FUZZ_SECONDS=0 skips it.
if [ "${MT_FUZZ_SECONDS:-60}" -gt 0 ]; then
  bash scripts/fuzz.sh "${MT_FUZZ_SECONDS:-60}"
fi
