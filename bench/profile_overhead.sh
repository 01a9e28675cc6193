#!/usr/bin/env bash
# The cost of --profile: the same `megatron train` run with the timeline off
# and on (every iteration after the first recorded, all ranks), alternated
# REPEATS times; from --log-json each side's fastest iteration over all runs
# (iterations 2..ITERS: the least disturbed one, since on 2 shared cores other
# work moves whole runs by tens of percent) and the median of the runs' mean
# ms per iteration. One JSON line per layout:
#   single rank, one thread, config (a) (4 layers, hidden 128, seq 64, 8 micro-batches of 12)
#   TP2 x PP2 on 4 ranks (one thread each), the same model.
# Usage: bash bench/profile_overhead.sh [iters] [repeats]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi_env.sh
[ -x build/megatron ] || MT_BUILD_TARGET=megatron bash scripts/build.sh
ITERS=${1:-12}
REPEATS=${2:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work/corpus.txt" <<'EOF'
import random, sys
random.seed(5)
subj = ["the cat", "a dog", "my friend", "the old king", "her brother", "the queen"]
verb = ["sees", "likes", "follows", "calls", "finds", "helps"]
obj = ["the river", "a small bird", "the castle", "his horse", "the garden", "a red apple"]
with open(sys.argv[1], "w") as f:
    for _ in range(3000):
        f.write(" ".join(random.choice(subj).capitalize() + " " + random.choice(verb) + " " +
                         random.choice(obj) + "." for _ in range(4)) + "\n\n")
EOF
./build/megatron preprocess --input "$work/corpus.txt" --output-prefix "$work/corpus" >/dev/null
model="--data-path $work/corpus_text_document --vocab-file $work/corpus_vocab.json
  --num-layers 4 --hidden-size 128 --num-attention-heads 4 --seq-length 64
  --micro-batch-size 12 --global-batch-size 96 --lr 1e-3 --split 100,0,0 --eval-interval 0
  --log-interval 1 --peak-tflops 1 --train-iters $ITERS"

# "mean,min" ms/iter over iterations 2..ITERS of a --log-json file
mean_ms() {
  python3 -c "
import json, sys
ms = [j['ms_per_iter'] for j in map(json.loads, open(sys.argv[1])) if j.get('iteration', 0) > 1 and 'ms_per_iter' in j]
print('%f,%f' % (sum(ms) / len(ms), min(ms)))" "$1"
}

bench() {  # name, launcher, profile ranks, extra flags
  local name=$1 launch=$2 ranks=$3 extra=$4 off=() on=()
  for r in $(seq "$REPEATS"); do
    for side in off on; do
      local log="$work/$name-$side-$r.json" flags=""
      [ "$side" = on ] && flags="--profile --profile-step-start 1 --profile-step-end $ITERS --profile-ranks $ranks --profile-dir $work/prof"
      # shellcheck disable=SC2086
      $launch train $model $extra $flags --log-json "$log" >"$work/out.txt" 2>&1 ||
        { cat "$work/out.txt"; exit 1; }
      if [ "$side" = off ]; then off+=("$(mean_ms "$log")"); else on+=("$(mean_ms "$log")"); fi
    done
  done
  local events
  events=$(python3 -c "
import glob, json
t = json.load(open(sorted(glob.glob('$work/prof/*.json'))[-1]))
print(sum(1 for e in t['traceEvents'] if e['ph'] == 'X'))")
  python3 -c "
import json, statistics, sys
off = [tuple(map(float, x.split(','))) for x in sys.argv[1].split()]
on = [tuple(map(float, x.split(','))) for x in sys.argv[2].split()]
a, b = min(x[1] for x in off), min(x[1] for x in on)
ma, mb = statistics.median(x[0] for x in off), statistics.median(x[0] for x in on)
print(json.dumps({'bench': 'profile_overhead', 'layout': sys.argv[3], 'iters': $ITERS,
                  'repeats': $REPEATS, 'off_ms_per_iter': round(a, 2), 'on_ms_per_iter': round(b, 2),
                  'overhead_pct': round(100 * (b - a) / a, 2),
                  'median_overhead_pct': round(100 * (mb - ma) / ma, 2),
                  'events_recorded': int(sys.argv[4]),
                  'off_run_means': [round(x[0], 1) for x in off], 'on_run_means': [round(x[0], 1) for x in on]}))
" "${off[*]}" "${on[*]}" "$name" "$events"
}

bench "1 rank" "env OMP_NUM_THREADS=1 ./build/megatron" "0" ""
bench "TP2 x PP2" "mpirun -n 4 --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 ./build/megatron" \
  "0 1 2 3" "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel"
