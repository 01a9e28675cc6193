#!/usr/bin/env bash
# megatron::DecodingSession through the installed package (CTest:
# decoding_package, label library): install the build into a temporary
# prefix, build examples/decode against that prefix alone, train a small
# character-level GPT with the build's `megatron`, then decode three prompts at
# once (greedy, and sampled with a seed) on 1 rank and at TP2 on 2 ranks:
# every completion must be what `megatron generate` gives for that prompt alone
# (the same tokens; log-probabilities to 1e-5), and bad requests must be
# refused on rank 0 without the other rank hanging.
# Usage: decoding_test.sh SOURCE_DIR BUILD_DIR MPIEXEC
set -euo pipefail
src=$1 build=$2 mpiexec=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
mpirun=("$mpiexec" --oversubscribe --bind-to none -n 2)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -f "$tmp/prefix/include/megatron/decoding.h"
cmake -S "$src/examples/decode" -B "$tmp/example" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
      -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/example" -j2 >/dev/null
decode=$tmp/example/decode megatron=$build/megatron
cd "$tmp"

for i in $(seq 1 60); do
  echo "The cat sees the river. The queen helps a dog. My friend finds a red apple $i."
done >corpus.txt
"$megatron" preprocess --input corpus.txt --output-prefix data >pre.log 2>&1 || { cat pre.log; exit 1; }
"$megatron" train --data-path data_text_document --vocab-file data_vocab.json \
  --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 64 \
  --micro-batch-size 8 --global-batch-size 8 --train-iters 150 --lr 1e-2 --min-lr 1e-3 \
  --lr-decay-style cosine --lr-warmup-iters 4 --hidden-dropout 0 --attention-dropout 0 \
  --split 100,0,0 --eval-interval 0 --peak-tflops 1 --log-interval 20 --save ckpt \
  >train.log 2>&1 || { cat train.log; exit 1; }

prompts=("The cat" "My friend finds" "The queen helps a dog. The")
# What `megatron generate` gives for each prompt alone (seed = base + index).
expect() {  # temperature seed_base
  local i=0
  for p in "${prompts[@]}"; do
    "$megatron" generate --load ckpt --prompt "$p" --max-new-tokens 12 --temperature "$1" \
      --seed $(($2 + i)) --output-json "gen_$i.json" >/dev/null 2>gen.log || { cat gen.log; exit 1; }
    i=$((i + 1))
  done
}
compare() {  # FILE: decode's JSON lines against gen_*.json
  python3 - "$1" "${#prompts[@]}" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
n = int(sys.argv[2])
assert len(lines) == n, f"{len(lines)} completions for {n} prompts"
for i, got in enumerate(lines):
    want = json.load(open(f"gen_{i}.json"))
    assert got["tokens"] == want["tokens"], f"prompt {i}: tokens {got['tokens']} != generate's {want['tokens']}"
    d = max(abs(a - b) for a, b in zip(got["log_probs"], want["log_probs"]))
    assert d <= 1e-5, f"prompt {i}: log-probabilities differ by {d}"
    assert got["text"] == want["text"], f"prompt {i}: text {got['text']!r} != {want['text']!r}"
print(f"{sys.argv[1]}: {n} completions as generate's")
PY
}
for t in 0 0.9; do
  expect "$t" 7
  "$decode" --load ckpt --max-tokens 12 --temperature "$t" --seed 7 "${prompts[@]}" \
    >one.jsonl 2>one.log || { cat one.log; exit 1; }
  compare one.jsonl
  "${mpirun[@]}" "$decode" --load ckpt --tp 2 --max-tokens 12 --temperature "$t" --seed 7 \
    "${prompts[@]}" >two.jsonl 2>two.log || { cat two.log; exit 1; }
  compare two.jsonl
done

# A prompt past max_length: refused on rank 0, naming it; rank 1 does not hang.
set +e
timeout 120 "${mpirun[@]}" "$decode" --load ckpt --tp 2 --max-tokens 100 "The cat" >bad.jsonl 2>bad.log
rc=$?
set -e
[ "$rc" != 124 ] || { echo "decode hung on a refused request"; cat bad.log; exit 1; }
grep -q "prompt 0 is 7 tokens, + max_tokens 100 = 107 past max_length 64" bad.log ||
  { echo "rc $rc"; cat bad.log; exit 1; }
echo "decoding_package: ok"
