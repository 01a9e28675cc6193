#!/usr/bin/env bash
# Issue 30's speed target, measured in one run (compare only within it): on
# GPT-2 small (bench_train config b, seq 1024, micro-batch 1) at DP2 (2 ranks
# x 1 thread), Megatron-FSDP's optim_grads_params (ZeRO-3) reaches >= 0.85 of
# the distributed optimizer's (ZeRO-1) tokens/s; optim_grads (ZeRO-2) beside
# them. Prints one JSON line with the three rates and the ratios. Run it on an
# idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bench=build/bench/bench_train
[ -x "$bench" ] || { echo "error: $bench is absent; build first (scripts/build.sh)" >&2; exit 1; }
iters=${FSDP_SPEED_ITERS:-3}
mpi="mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 -n 2"
rate() { $mpi "$bench" b "$iters" --threads 1 "$1" | grep '^{' | tail -1 |
         sed 's/.*"tokens_per_s":\([0-9.e+-]*\).*/\1/'; }
z1=$(rate --zero)
z2=$(rate --shard-grads)
z3=$(rate --shard-params)
awk -v z1="$z1" -v z2="$z2" -v z3="$z3" 'BEGIN {
  printf "{\"bench\":\"fsdp_speed\",\"config\":\"b\",\"dp\":2,\"threads_per_rank\":1,"
  printf "\"zero1_tokens_per_s\":%.1f,\"zero2_tokens_per_s\":%.1f,\"zero3_tokens_per_s\":%.1f,", z1, z2, z3
  printf "\"zero2_over_zero1\":%.3f,\"zero3_over_zero1\":%.3f}\n", z2 / z1, z3 / z1
}'
