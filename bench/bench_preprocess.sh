#!/usr/bin/env bash
# Throughput of `megatron preprocess` with GPT-2 BPE, one JSON line per run:
#   bash bench/bench_preprocess.sh [build_dir]      (default: build)
# Inputs: Tiny Shakespeare as JSONL (documents = blank-line-separated
# paragraphs; ../shared/data/tinyshakespeare.txt, else the fortunes corpus)
# and a ~100 MB synthetic JSONL (bench/make_jsonl.py, seeded), both cached in
# data/bench/. Each at 1 and 2 workers; MB/s counts input bytes over the whole
# run (tokenizer loading included) and, "excl_load", without the load time
# (measured on a one-line input). Also js-tiktoken (Node) on the same files
# when installed (scripts/fetch_gpt2_tokenizer.sh --with-tiktoken): the same
# ids, its time includes JSON parsing like ours.
# Megatron-LM's Python preprocess: 1.3 MB/s per worker on Tiny Shakespeare
# with its word cache warm (measured for issue 9; not runnable here).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
bin="$build/megatron"
[ -x "$bin" ] || { echo "bench_preprocess: $bin not built" >&2; exit 1; }
bash "$here/scripts/fetch_gpt2_tokenizer.sh" --with-tiktoken >&2 || true
gpt2="$here/data/gpt2"
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

now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
run() {  # run <input> <workers> -> seconds
  local t0 t1
  t0=$(now)
  "$bin" preprocess --overwrite --input "$1" --output-prefix "$tmp/out" --tokenizer-type GPT2BPETokenizer \
    --vocab-file "$gpt2/gpt2-vocab.json" --merge-file "$gpt2/gpt2-merges.txt" --append-eod \
    --workers "$2" > "$tmp/log"
  t1=$(now)
  calc "$t1 - $t0"
}
echo '{"text": "x"}' > "$tmp/one.jsonl"
load=$(run "$tmp/one.jsonl" 1)
load=$(run "$tmp/one.jsonl" 1)
for input in "$small" "$big"; do
  bytes=$(stat -c %s "$input")
  for w in 1 2; do
    s=$(run "$input" "$w")
    tokens=$(sed -n 's/.* documents, \([0-9]*\) tokens.*/\1/p' "$tmp/log")
    printf '{"bench": "preprocess", "tokenizer": "GPT2BPETokenizer", "input": "%s", "bytes": %d, "tokens": %d, "workers": %d, "seconds": %.3f, "load_seconds": %.3f, "mb_per_s": %.1f, "mb_per_s_excl_load": %.1f}\n' \
      "$(basename "$input")" "$bytes" "$tokens" "$w" "$s" "$load" \
      "$(calc "$bytes / 1000000 / $s")" "$(calc "$bytes / 1000000 / ($s - $load)")"
  done
  if command -v node > /dev/null && [ -f "$gpt2/node_modules/js-tiktoken/package.json" ]; then
    t0=$(now)
    node "$here/tests/reference/gpt2_tiktoken_ids.mjs" "$gpt2/node_modules" "$input" lines > /dev/null
    t1=$(now)
    s=$(calc "$t1 - $t0")
    printf '{"bench": "preprocess", "tokenizer": "js-tiktoken gpt2 (node)", "input": "%s", "bytes": %d, "workers": 1, "seconds": %.3f, "mb_per_s": %.1f}\n' \
      "$(basename "$input")" "$bytes" "$s" "$(calc "$bytes / 1000000 / $s")"
  fi
done
