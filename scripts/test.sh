#!/usr/bin/env bash
# Installs the dependencies, builds, and runs the whole test suite (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
source scripts/mpi_env.sh
cd build && ctest --output-on-failure -j2 --timeout 600
