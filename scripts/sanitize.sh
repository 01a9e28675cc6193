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
# Left out here (they run in the normal suite): the three tests that measure
# the process's resident memory. ASan adds shadow memory (1 byte per 8
# touched: measured/predicted = 1.16) and keeps freed blocks in quarantine
# ("freed buffer still resident"), so their RSS bounds cannot hold under it.
rss_tests='^(HostBuffer\.ResidentBytesMatchTheTouchedSize|Rss\.PeakCoversATouchedBufferAfterItIsFreed|MemoryReport\.MeasuredMatchesPredictedAndTheLeversMoveIt)$'
cd build-asan && ctest --output-on-failure -j2 --timeout 1200 -E "$rss_tests" "$@"
