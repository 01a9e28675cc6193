#!/usr/bin/env bash
# A model shape's FLOP rate over the Llama-shaped model's at GPT-2 small's
# width, measured in one run (compare only within it): bench_train's CONFIG
# against its llama config, 2 threads, one rank, both counting the FLOPs
# Megatron counts. The two run alternately (SHAPE_SPEED_ROUNDS rounds, best of
# each) so that a slow spell of the machine hits both. Prints one JSON line
# with the ratio and the issue's target. Run it on an idle machine.
#   bash bench/shape_speed.sh qwen3      # issue 38: Qwen3's attention, target 0.95
#   bash bench/shape_speed.sh deepseek   # issue 42: MLA + DeepSeek's MoE, target 0.8
set -euo pipefail
cd "$(dirname "$0")/.."
config=${1:?usage: bash bench/shape_speed.sh qwen3|deepseek}
case "$config" in
  qwen3) target=0.95 ;;
  deepseek) target=0.8 ;;
  *) echo "error: config '$config' is not qwen3 or deepseek" >&2; exit 1 ;;
esac
bench=build/bench/bench_train
[ -x "$bench" ] || { echo "error: $bench is absent; build first (scripts/build.sh)" >&2; exit 1; }
iters=${SHAPE_SPEED_ITERS:-3}
rounds=${SHAPE_SPEED_ROUNDS:-2}
field() { sed 's/.*"'"$2"'":\([0-9.e+-]*\).*/\1/' <<<"$1"; }
last() { grep '^{' | tail -1; }
best_llama=0 best_shape=0
for _ in $(seq "$rounds"); do
  l=$(field "$("$bench" llama "$iters" --threads 2 | last)" tflops)
  q=$(field "$("$bench" "$config" "$iters" --threads 2 | last)" tflops)
  best_llama=$(awk -v a="$best_llama" -v b="$l" 'BEGIN { print (b > a ? b : a) }')
  best_shape=$(awk -v a="$best_shape" -v b="$q" 'BEGIN { print (b > a ? b : a) }')
done
awk -v c="$config" -v lt="$best_llama" -v qt="$best_shape" -v r="$rounds" -v t="$target" 'BEGIN {
  printf "{\"bench\":\"shape_speed\",\"config\":\"%s\",\"threads\":2,\"rounds\":%d,", c, r
  printf "\"llama_tflops\":%.4f,\"%s_tflops\":%.4f,", lt, c, qt
  printf "\"%s_over_llama_flop_rate\":%.3f,\"target\":%s}\n", c, qt / lt, t
}'
