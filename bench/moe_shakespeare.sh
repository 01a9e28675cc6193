#!/usr/bin/env bash
# Issue 29's quality check: on Tiny Shakespeare, an 8-expert top-2 MoE model
# against the dense model of equal active parameters, at equal tokens. The
# model and schedule are bench/shakespeare_2000.sh's config (a) (4 layers,
# hidden 128, seq 64, micro-batch 12, 2000 iterations); the dense MLP has ffn
# 512 (4h), each expert ffn 256, so a token's two experts hold as many
# weights as the dense MLP. Router: aux loss 0.01, z-loss 0.001. Prints one
# JSON line with both validation curves (every 250 iterations) and the
# seconds each run took. Needs ../shared/data.
set -euo pipefail
cd "$(dirname "$0")/.."
src=../shared/data/tinyshakespeare.txt
[ -f "$src" ] || { echo "error: $src is absent; this benchmark needs ../shared/data" >&2; exit 1; }
out=runs/bench_moe_shakespeare
mkdir -p "$out"
./build/megatron preprocess --overwrite --input "$src" --output-prefix "$out/shakespeare" >/dev/null
threads=${OMP_NUM_THREADS:-$(nproc)}
iters=${MOE_BENCH_ITERS:-2000}
run() {  # name, extra flags
  local name=$1; shift
  rm -f "$out/$name.jsonl"
  local start end
  start=$(date +%s.%N)
  OMP_NUM_THREADS=$threads ./build/megatron train \
    --data-path "$out/shakespeare_text_document" --vocab-file "$out/shakespeare_vocab.json" \
    --num-layers 4 --hidden-size 128 --num-attention-heads 4 --seq-length 64 \
    --micro-batch-size 12 --global-batch-size 12 --train-iters "$iters" \
    --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 100 \
    --weight-decay 0.1 --adam-beta2 0.99 --clip-grad 1.0 \
    --hidden-dropout 0 --attention-dropout 0 --split 90,10,0 \
    --log-interval 250 --eval-interval 250 --eval-iters 100 --log-json "$out/$name.jsonl" \
    "$@" >&2
  end=$(date +%s.%N)
  awk "BEGIN{printf \"%.1f\", $end - $start}" > "$out/$name.seconds"
}
run dense --ffn-hidden-size 512
run moe --ffn-hidden-size 512 --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 256 \
  --moe-aux-loss-coeff 0.01 --moe-z-loss-coeff 0.001
curve() { grep val_loss "$out/$1.jsonl" | sed 's/.*"iteration":\([0-9]*\).*"val_loss":\([0-9.e+-]*\).*/[\1,\2]/' | paste -sd, -; }
printf '{"bench":"moe_shakespeare","threads":%s,"iterations":%s,"dense_val":[%s],"moe_val":[%s],"dense_seconds":%s,"moe_seconds":%s}\n' \
  "$threads" "$iters" "$(curve dense)" "$(curve moe)" "$(cat "$out/dense.seconds")" "$(cat "$out/moe.seconds")"
