#!/usr/bin/env bash
# Configures and builds megatron.cpp (Release, -march=native) into build/.
# Extra arguments go to CMake, e.g. scripts/build.sh -DMT_NATIVE=OFF;
# MT_BUILD_TARGET=megatron builds only the binary (what the quick start needs).
# Compiles through ccache where it is installed (scripts/ccache_flags.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ccache_flags.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${MT_CCACHE_FLAGS[@]}" "$@" >/dev/null
cmake --build build -j"$(nproc)" ${MT_BUILD_TARGET:+--target "$MT_BUILD_TARGET"}
echo "build: ok (build/megatron)"
