#!/usr/bin/env bash
# --async-save: the iteration that overlaps a background save against an
# ordinary one (one JSON line). OMP_NUM_THREADS=1 so that the second core is
# left to the writer thread (2-core machine). Usage: bench/async_save.sh [build] [hidden] [layers]
set -euo pipefail
case "${1:-}" in -h|--help) echo "usage: $0 [build-dir] [hidden] [layers]"; exit 0;; esac
BUILD=${1:-build}; HIDDEN=${2:-512}; LAYERS=${3:-4}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
python3 -c "
import random; random.seed(1); w='the cat sat on a mat and dog ran far'.split()
open('$T/c.txt','w').write('\n\n'.join(' '.join(random.choice(w) for _ in range(400)) for _ in range(200)))"
"$BUILD/megatron" preprocess --input "$T/c.txt" --output-prefix "$T/c" > /dev/null
ITERS=30; SAVE=10
OMP_NUM_THREADS=1 "$BUILD/megatron" train --data-path "$T/c_text_document" --vocab-file "$T/c_vocab.json" \
  --num-layers "$LAYERS" --hidden-size "$HIDDEN" --num-attention-heads 8 --seq-length 128 \
  --micro-batch-size 4 --global-batch-size 4 --lr 1e-4 --lr-warmup-iters 1 --train-iters $ITERS \
  --split 100,0,0 --eval-interval 0 --log-interval 1 --save "$T/ckpt" --save-interval $SAVE \
  --async-save --log-json "$T/log.json" > "$T/out.txt" 2>&1 || { cat "$T/out.txt"; exit 1; }
python3 - "$T/log.json" "$T/out.txt" $SAVE $ITERS <<'PY'
import json, sys, statistics, re
rows = {r["iteration"]: r["ms_per_iter"] for r in map(json.loads, open(sys.argv[1])) if "ms_per_iter" in r}
save, iters = int(sys.argv[3]), int(sys.argv[4])
out = open(sys.argv[2]).read()
overlap = [save * k + 1 for k in range(1, iters // save) if save * k + 1 in rows]
ordinary = [ms for it, ms in rows.items() if it > 2 and (it - 1) % save != 0 and it % save != 0]
base = statistics.median(ordinary)
over = max(rows[i] for i in overlap)
commits = [float(x) for x in re.findall(r"committed ([0-9.]+) s after", out)]
exposed = [float(x) for x in re.findall(r"in the background \(([0-9.]+) s exposed\)", out)]
print(json.dumps({"bench": "async_save", "omp_threads": 1, "ordinary_ms": round(base, 2),
                  "overlapping_ms": round(over, 2), "ratio": round(over / base, 3),
                  "exposed_save_s": max(exposed), "background_save_s": max(commits),
                  "overlapping_iterations": overlap}))
PY
