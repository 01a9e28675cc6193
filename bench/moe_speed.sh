#!/usr/bin/env bash
# Issue 29's speed targets, measured in one run (compare only within it):
#  - an 8-expert top-2 model at GPT-2 small's width (bench_train's llama
#    config, each expert's ffn half the dense one's: equal active parameters
#    and FLOPs per token) reaches >= 0.8 of the dense model's FLOP rate
#    (2 threads, one rank; both count the FLOPs a token visits);
#  - EP2 on 2 ranks (1 thread each; all-to-all and all-gather dispatchers)
#    reaches >= 0.85 of one rank's tokens/s per core (one rank, 1 thread).
# Prints one JSON line with the figures and both ratios. Run it on an idle
# machine: anything else on the cores makes the ratios meaningless.
set -euo pipefail
cd "$(dirname "$0")/.."
bench=build/bench/bench_train
[ -x "$bench" ] || { echo "error: $bench is absent; build first (scripts/build.sh)" >&2; exit 1; }
iters=${MOE_SPEED_ITERS:-3}
moe="--experts 8 --topk 2"
field() { sed 's/.*"'"$2"'":\([0-9.e+-]*\).*/\1/' <<<"$1"; }
last() { grep '^{' | tail -1; }
dense=$("$bench" llama "$iters" --threads 2 | last)
moe2=$("$bench" llama "$iters" --threads 2 $moe | last)
one=$("$bench" llama "$iters" --threads 1 $moe | last)
mpi="mpirun --oversubscribe --allow-run-as-root -n 2"
a2a=$($mpi "$bench" llama "$iters" --threads 1 $moe --ep 2 --alltoall | last)
ag=$($mpi "$bench" llama "$iters" --threads 1 $moe --ep 2 | last)
awk -v dt="$(field "$dense" tflops)" -v mt="$(field "$moe2" tflops)" \
    -v one="$(field "$one" tokens_per_s)" -v a2a="$(field "$a2a" tokens_per_s)" \
    -v ag="$(field "$ag" tokens_per_s)" 'BEGIN {
  printf "{\"bench\":\"moe_speed\",\"config\":\"llama\",\"experts\":8,\"topk\":2,"
  printf "\"dense_tflops\":%.4f,\"moe_tflops\":%.4f,\"moe_over_dense_flop_rate\":%.3f,", dt, mt, mt / dt
  printf "\"one_rank_1thread_tokens_per_s\":%.1f,\"ep2_alltoall_tokens_per_s\":%.1f,", one, a2a
  printf "\"ep2_allgather_tokens_per_s\":%.1f,\"ep2_alltoall_per_core_ratio\":%.3f,", ag, a2a / 2 / one
  printf "\"ep2_allgather_per_core_ratio\":%.3f}\n", ag / 2 / one
}'
