#!/usr/bin/env bash
# Builds megatron.cpp with AddressSanitizer + UndefinedBehaviorSanitizer into
# build-asan/ (CMake option MT_SANITIZE) and runs the whole CTest suite there.
# Debug at -O1: MT_DCHECKs on, still fast enough for the CLI tests.
# Extra arguments go to ctest, e.g. scripts/sanitize.sh -R data_tests.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
      -DMT_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$(nproc)"
source scripts/mpi_env.sh
source scripts/sanitizer_env.sh
cd build-asan && ctest --output-on-failure -j2 --timeout 1200 "$@"
