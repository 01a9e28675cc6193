#!/usr/bin/env bash
# Throughput of `megatron preprocess` with HuggingFaceTokenizer (Qwen3's
# tokenizer.json; Llama 3's and Gemma 3's with "all") beside GPT-2 BPE, one
# JSON line per run:
#   bash bench/bench_preprocess_hf.sh [build_dir] [all]     (default: build)
# Inputs (cached in data/bench/): Tiny Shakespeare as JSONL (else the
# fortunes corpus) and the ~100 MB synthetic JSONL of bench_preprocess.sh
# (English), plus ~20 MB of tests/data/fixtures/hf_tokenizer_corpus.jsonl
# repeated (many scripts, code, emoji, whitespace runs). MB/s counts input
# bytes over the whole run (tokenizer loading included) and, "excl_load",
# without the load time (measured on a one-line input). Target: >= 5 MB/s per
# core (workers = 1).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
all="${2:-}"
bin="$build/megatron"
[ -x "$bin" ] || { echo "bench_preprocess_hf: $bin not built" >&2; exit 1; }
bash "$here/scripts/fetch_gpt2_tokenizer.sh" >&2 || true
bash "$here/scripts/fetch_hf_tokenizers.sh" >&2 || true
gpt2="$here/data/gpt2"
hf="$here/data/hf"
cache="$here/data/bench"
mkdir -p "$cache"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

shakes="$here/../shared/data/tinyshakespeare.txt"
if [ -f "$shakes" ]; then small_name=tinyshakespeare; small_src="$shakes"
else small_name=fortunes; small_src=/usr/share/games/fortunes/fortunes; fi
small="$cache/$small_name.jsonl"
if [ ! -f "$small" ]; then
  python3 -c '
import json, sys
text = open(sys.argv[1], encoding="utf-8").read()
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for d in text.split("\n\n"):
        if d: f.write(json.dumps({"text": d}) + "\n")' "$small_src" "$small"
fi
big="$cache/synthetic_100mb.jsonl"
if [ ! -f "$big" ]; then
  srcs=("$small_src")
  for f in fortunes literature riddles; do
    [ -f "/usr/share/games/fortunes/$f" ] && srcs+=("/usr/share/games/fortunes/$f")
  done
  python3 "$here/bench/make_jsonl.py" "$big" 100 "${srcs[@]}"
fi
multi="$cache/hf_multilingual_20mb.jsonl"
if [ ! -f "$multi" ]; then
  corpus="$here/tests/data/fixtures/hf_tokenizer_corpus.jsonl"
  n=$(( 20000000 / $(stat -c %s "$corpus") + 1 ))
  for _ in $(seq "$n"); do cat "$corpus"; done > "$multi.tmp"
  mv "$multi.tmp" "$multi"
fi

now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
run() {  # run <input> <workers> <tokenizer flags...> -> seconds
  local input="$1" workers="$2" t0 t1
  shift 2
  t0=$(now)
  "$bin" preprocess --input "$input" --output-prefix "$tmp/out" "$@" --append-eod \
    --workers "$workers" > "$tmp/log"
  t1=$(now)
  calc "$t1 - $t0"
}
echo '{"text": "x"}' > "$tmp/one.jsonl"
bench() {  # bench <name> <workers list> <tokenizer flags...>
  local name="$1" workers="$2"
  shift 2
  local load
  load=$(run "$tmp/one.jsonl" 1 "$@")
  load=$(run "$tmp/one.jsonl" 1 "$@")
  for input in "$small" "$big" "$multi"; do
    bytes=$(stat -c %s "$input")
    for w in $workers; do
      s=$(run "$input" "$w" "$@")
      tokens=$(sed -n 's/.* documents, \([0-9]*\) tokens.*/\1/p' "$tmp/log")
      printf '{"bench": "preprocess", "tokenizer": "%s", "input": "%s", "bytes": %d, "tokens": %d, "workers": %d, "seconds": %.3f, "load_seconds": %.3f, "mb_per_s": %.1f, "mb_per_s_excl_load": %.1f}\n' \
        "$name" "$(basename "$input")" "$bytes" "${tokens:-0}" "$w" "$s" "$load" \
        "$(calc "$bytes / 1000000 / $s")" "$(calc "$bytes / 1000000 / ($s - $load)")"
    done
  done
}
bench GPT2BPETokenizer "1 2" --tokenizer-type GPT2BPETokenizer \
  --vocab-file "$gpt2/gpt2-vocab.json" --merge-file "$gpt2/gpt2-merges.txt"
bench "HuggingFaceTokenizer qwen3" "1 2" --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$hf/qwen3"
if [ "$all" = all ]; then
  for m in llama3 gemma3; do
    bench "HuggingFaceTokenizer $m" "1" --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$hf/$m"
  done
fi
