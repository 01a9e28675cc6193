#!/usr/bin/env bash
# Config (a) training-step throughput: megatron.cpp vs plain PyTorch eager
# (bench/pytorch_gpt.py, Debian's python3-torch on OpenBLAS), measured in the
# same run, at 1 and 2 threads. PyTorch gets its best settings here:
# OMP_WAIT_POLICY=passive, OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset, and
# glibc malloc told not to return memory to the system.
# Installs python3-torch and libopenblas0-pthread (benchmark-only dependencies)
# if they are missing. Prints JSON lines, the last one the speed-up.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
/usr/bin/python3 -c "import torch" 2>/dev/null || need+=(python3-torch)
[ -e /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 ] || need+=(libopenblas0-pthread)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${need[@]}"
fi
[ -x build/bench/bench_train ] || bash scripts/build.sh
ours=$(./build/bench/bench_train a)
echo "$ours"
torch_line() {
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=passive MALLOC_MMAP_MAX_=0 \
    MALLOC_TRIM_THRESHOLD_=17179869184 \
    LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread \
    /usr/bin/python3 bench/pytorch_gpt.py --num-layers 4 --hidden-size 128 \
    --num-attention-heads 4 --seq-length 64 --micro-batch-size 12 --vocab-size 65 \
    --iters 50 --warmup 5 --threads "$1"
}
t1=$(torch_line 1); echo "$t1"
t2=$(torch_line 2); echo "$t2"
tps() { sed 's/.*"tokens_per_s": *\([0-9.e+]*\).*/\1/'; }
ours2=$(echo "$ours" | grep '"threads":2' | tps)
best_torch=$(printf '%s\n%s\n' "$(echo "$t1" | tps)" "$(echo "$t2" | tps)" | sort -g | tail -1)
awk -v a="$ours2" -v b="$best_torch" 'BEGIN { printf "{\"bench\":\"speedup_vs_pytorch\",\"config\":\"a\",\"megatron_cpp_2_threads_tokens_per_s\":%.0f,\"pytorch_best_tokens_per_s\":%.0f,\"ratio\":%.2f}\n", a, b, a / b }'
