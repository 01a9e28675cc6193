#!/usr/bin/env bash
# What `megatron train` costs beyond the training step itself at config (a)
# (4 layers, hidden 128, 4 heads, seq 64, micro-batch 12; 2 threads): data
# loading from a preprocessed corpus, logging, timers, the LR schedule, the
# optimizer step as the CLI runs it. The same model is timed in
# `bench_train a` (random tokens, no data, no logs) and in `megatron train`
# on an indexed dataset, alternated ROUNDS times. `megatron train` is timed
# end to end: the wall time of a run of LONG iterations minus one of SHORT
# iterations, divided by LONG - SHORT (start-up, data indexing and exit
# cancel out; every per-iteration cost stays in). One JSON line: each side's
# best round, and the CLI's overhead over bench_train (the issue wants <= 5%).
# Usage: bash bench/cli_overhead.sh [rounds] [short] [long]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SHORT=${2:-50}
LONG=${3:-450}
[ -x build/megatron ] && [ -x build/bench/bench_train ] || bash scripts/build.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work/corpus.txt" <<'EOF'
import random, sys
random.seed(7)
words = "the a king queen river castle horse garden bird sees likes follows calls finds".split()
with open(sys.argv[1], "w") as f:
    for _ in range(4000):
        f.write(" ".join(random.choice(words) for _ in range(40)) + ".\n\n")
EOF
./build/megatron preprocess --input "$work/corpus.txt" --output-prefix "$work/corpus" >/dev/null
model="--data-path $work/corpus_text_document --vocab-file $work/corpus_vocab.json
  --num-layers 4 --hidden-size 128 --num-attention-heads 4 --seq-length 64
  --max-position-embeddings 64 --micro-batch-size 12 --global-batch-size 12 --lr 1e-4
  --hidden-dropout 0 --attention-dropout 0 --split 100,0,0 --eval-interval 0 --log-interval 10"

cli_ms() {  # ms per iteration of `megatron train`, end to end
  local t0 t1 t2
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=2 ./build/megatron train $model --train-iters "$SHORT" >"$work/out.txt" 2>&1 ||
    { cat "$work/out.txt"; exit 1; }
  t1=$(date +%s.%N)
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=2 ./build/megatron train $model --train-iters "$LONG" >"$work/out.txt" 2>&1 ||
    { cat "$work/out.txt"; exit 1; }
  t2=$(date +%s.%N)
  python3 -c "print(1e3 * (($t2 - $t1) - ($t1 - $t0)) / ($LONG - $SHORT))"
}
bench_ms() {
  OMP_NUM_THREADS=2 ./build/bench/bench_train a "$LONG" --threads 2 |
    python3 -c "import json, sys; print(json.loads(sys.stdin.readline())['ms_per_iter'])"
}

cli=() ref=()
for _ in $(seq "$ROUNDS"); do
  ref+=("$(bench_ms)")
  cli+=("$(cli_ms)")
done
python3 -c "
import json, sys
ref = [float(x) for x in sys.argv[1].split()]
cli = [float(x) for x in sys.argv[2].split()]
b, c = min(ref), min(cli)
print(json.dumps({'bench': 'cli_overhead', 'config': 'a', 'threads': 2, 'rounds': len(ref),
                  'bench_train_ms_per_iter': round(b, 2), 'megatron_train_ms_per_iter': round(c, 2),
                  'overhead_pct': round(100 * (c - b) / b, 2),
                  'bench_train_rounds': [round(x, 2) for x in ref],
                  'megatron_train_rounds': [round(x, 2) for x in cli]}))
" "${ref[*]}" "${cli[*]}"
