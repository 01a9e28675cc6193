#!/usr/bin/env bash
# Placement across nodes: 2 emulated nodes x 2 ranks (scripts/emulated_nodes.sh,
# root), one thread per rank, the inter-node link rate-limited to RATE (default
# 1gbit; a netem delay is added with DELAY=200us where the kernel has netem).
# For each placement, bench_train's JSON line (tokens/s, comm_ms_per_iter) with
# "placement" added:
#   tp-inside_dp-across  TP2 inside each node, DP2 across (Megatron's order, --map-by slot)
#   tp-across_dp-inside  the same layout with ranks dealt round-robin (--map-by node)
#   pp-across_tp-inside  PP2 across the nodes, TP2 inside each
# Usage: bench/bench_nodes.sh [config (default small)] [iters (default 4)]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi_env.sh
[ -x build/bench/bench_train ] || bash scripts/build.sh
config=${1:-small}
iters=${2:-4}
shaping=(--rate "${RATE:-1gbit}")
[[ -n ${DELAY:-} ]] && shaping+=(--delay "$DELAY")
run() {  # run PLACEMENT "MPIRUN FLAGS" BENCH FLAGS...
  local placement=$1 map=$2
  shift 2
  # shellcheck disable=SC2086
  MT_NODES_ID=auto bash scripts/emulated_nodes.sh run 2 2 "${shaping[@]}" -- --bind-to none -n 4 \
    -x OMP_NUM_THREADS=1 $map "$PWD/build/bench/bench_train" "$config" "$iters" --threads 1 "$@" |
    grep '^{' | sed "s/^{/{\"placement\":\"$placement\",\"link\":\"${RATE:-1gbit} ${DELAY:-no delay}\",/"
}
run tp-inside_dp-across "" --tp 2 --m 2
run tp-across_dp-inside "--map-by node" --tp 2 --m 2
run pp-across_tp-inside "" --tp 2 --pp 2 --m 4
