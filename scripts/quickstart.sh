#!/usr/bin/env bash
# The main job: install, build, train the default character-level GPT on the
# fortunes corpus from Debian, then generate text from it. About 4 minutes on
# 2 cores. Re-running resumes (or, once finished, just generates again).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
MT_BUILD_TARGET=megatron bash scripts/build.sh
mkdir -p runs/quickstart
if [ ! -f runs/quickstart/fortunes_text_document.idx ]; then
  bash scripts/prepare_fortunes.sh runs/quickstart/fortunes.txt
  ./build/megatron preprocess --input runs/quickstart/fortunes.txt \
    --output-prefix runs/quickstart/fortunes
fi
threads=$(nproc)
OMP_NUM_THREADS=$threads ./build/megatron train --config configs/quickstart.toml \
  --data-path runs/quickstart/fortunes_text_document \
  --vocab-file runs/quickstart/fortunes_vocab.json \
  --save runs/quickstart/checkpoints --load runs/quickstart/checkpoints \
  --log-json runs/quickstart/log.jsonl
echo "---- sample ----"
OMP_NUM_THREADS=$threads ./build/megatron generate --load runs/quickstart/checkpoints \
  --prompt "The meaning of life is" --max-new-tokens 400 --temperature 0.8 --top-k 40
