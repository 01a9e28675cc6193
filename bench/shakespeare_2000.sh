#!/usr/bin/env bash
# Config (a) trained for 2000 iterations on Tiny Shakespeare (the issue's
# convergence benchmark): 4 layers, 4 heads, hidden 128, seq 64, micro-batch 12,
# lr 1e-3 cosine to 1e-4, 100 warm-up iterations, weight decay 0.1, beta2 0.99,
# clip 1.0, no dropout, split 90/10 (by documents = paragraphs, in order, so the
# validation set is the last ~10% of the text as in nanoGPT's character split).
# Prints one JSON line with the final validation loss. Needs ../shared/data.
# Extra arguments go to `megatron train` (e.g. --bf16: the issue's bf16 run
# must end within 0.02 of the fp32 one).
set -euo pipefail
cd "$(dirname "$0")/.."
src=../shared/data/tinyshakespeare.txt
[ -f "$src" ] || { echo "error: $src is absent; this benchmark needs ../shared/data" >&2; exit 1; }
out=runs/bench_shakespeare
mkdir -p "$out"
rm -rf "$out/log.jsonl"
./build/megatron preprocess --overwrite --input "$src" --output-prefix "$out/shakespeare" >/dev/null
threads=${OMP_NUM_THREADS:-$(nproc)}
start=$(date +%s.%N)
OMP_NUM_THREADS=$threads ./build/megatron train \
  --data-path "$out/shakespeare_text_document" --vocab-file "$out/shakespeare_vocab.json" \
  --num-layers 4 --hidden-size 128 --num-attention-heads 4 --seq-length 64 \
  --micro-batch-size 12 --global-batch-size 12 --train-iters 2000 \
  --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 100 \
  --weight-decay 0.1 --adam-beta2 0.99 --clip-grad 1.0 \
  --hidden-dropout 0 --attention-dropout 0 --split 90,10,0 \
  --log-interval 500 --eval-interval 500 --eval-iters 100 --log-json "$out/log.jsonl" "$@" >&2
end=$(date +%s.%N)
val=$(grep val_loss "$out/log.jsonl" | tail -1 | sed 's/.*"val_loss":\([0-9.e+-]*\).*/\1/')
printf '{"bench":"shakespeare_2000","impl":"megatron.cpp","threads":%s,"flags":"%s","val_loss":%s,"seconds":%.1f}\n' \
  "$threads" "$*" "$val" "$(awk "BEGIN{print $end - $start}")"
