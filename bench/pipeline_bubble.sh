#!/usr/bin/env bash
# Pipeline bubble, measured against (P - 1) / m, for P = 2, 4 and m = 4, 8, 16
# on config (a) (4 layers, so PP = 4 is one layer per stage), one thread per
# rank; then PP = 2 vs one rank with 2 threads on GPT-2 small. JSON lines.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi_env.sh
[ -x build/bench/bench_train ] || bash scripts/build.sh
run() { mpirun -n "$1" --bind-to none -x OMP_NUM_THREADS=1 ./build/bench/bench_train "${@:2}"; }
for p in 2 4; do
  for m in 4 8 16; do
    run "$p" a 20 --threads 1 --pp "$p" --m "$m"
  done
done
for m in 4 8; do  # interleaved, 2 chunks of 1 layer per rank
  run 2 a 20 --threads 1 --pp 2 --vpp 2 --m "$m"
done
./build/bench/bench_train b 3 --threads 2 --m 4
run 2 b 3 --threads 1 --pp 2 --m 4
run 2 b 3 --threads 1 --pp 2 --m 4 --last-stage-layers 3  # the output layer balances 3 layers
run 2 b 2 --threads 1 --pp 2 --m 8 --last-stage-layers 3
