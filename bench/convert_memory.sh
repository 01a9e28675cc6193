#!/usr/bin/env bash
# `megatron convert` streams: a random Hugging Face Llama larger than half this
# machine's RAM (default ~14.2 GB of float32 weights, 3.6B parameters) is
# written tensor by tensor (bench/make_big_hf.py), imported at TP2 x PP2 and
# exported back; each direction's peak resident memory is printed (the
# converter's own summary line and GNU time's maximum RSS) as JSON lines.
# Needs ~3x the model's size in free disk (--dir, default runs/bench_convert)
# and python3-torch. Sizes: HIDDEN LAYERS FFN environment variables; the
# vocabulary is a SentencePiece model trained here on the repository's docs.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-runs/bench_convert}
HIDDEN=${HIDDEN:-4096} LAYERS=${LAYERS:-20} FFN=${FFN:-11008}
rm -rf "$dir" && mkdir -p "$dir"
[ -x /usr/bin/time ] || apt-get install -y time >/dev/null
cat README.md DEVELOPERS.md bench/README.md tests/reference/README.md >"$dir/corpus.txt"
spm_train --input="$dir/corpus.txt" --model_prefix="$dir/sp" --vocab_size=2000 \
  --hard_vocab_limit=false --model_type=bpe >/dev/null 2>&1
vocab=$(spm_export_vocab --model="$dir/sp.model" | wc -l)
/usr/bin/python3 bench/make_big_hf.py --out "$dir/hf" --hidden "$HIDDEN" --layers "$LAYERS" \
  --heads 32 --kv-heads 8 --ffn "$FFN" --vocab "$vocab" >"$dir/made.json"
cp "$dir/sp.model" "$dir/hf/tokenizer.model"
measure() {  # label, command...
  local label=$1; shift
  /usr/bin/time -f '%M' -o "$dir/rss_$label" "$@" >"$dir/log_$label" 2>&1
  printf '{"bench":"convert_memory","direction":"%s","model_bytes":%s,"max_rss_mb":%.0f,"summary":%s}\n' \
    "$label" "$(sed 's/.*"bytes": *\([0-9]*\).*/\1/' "$dir/made.json")" \
    "$(awk '{print $1/1024}' "$dir/rss_$label")" \
    "$(tail -1 "$dir/log_$label" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().strip()))')"
}
measure import ./build/megatron convert --model-type GPT --loader hf --saver megatron \
  --load-dir "$dir/hf" --save-dir "$dir/ckpt" --target-tensor-parallel-size 2 \
  --target-pipeline-parallel-size 2
measure export ./build/megatron convert --model-type GPT --loader megatron --saver hf \
  --load-dir "$dir/ckpt" --save-dir "$dir/hf_out"
