#!/usr/bin/env bash
# Memory per rank, predicted (closed form, src/memory/memory_report.cc) against
# measured (resident bytes each class's buffers added), for the GPT-2-small
# shape (12 layers, hidden 768, 12 heads, seq 1024, micro-batch 1, vocabulary
# padded to 50304), one training iteration each with `megatron train --log-memory`:
#   plain | ZeRO-1 DP=2, 4 | TP=2+SP | TP=2+SP+selective | full recompute (uniform, 1 layer)
#   | bf16 | bf16 + ZeRO-1 DP=2, 4
# Prints one JSON line per layout (rank 0's classes, and bytes per parameter —
# weights + gradients + optimizer state — next to Megatron-LM's formula from
# the Megatron Core docs, "Distributed Optimizer": fp32 16, or 8 + 8/d with the
# distributed optimizer; bf16 18, or 6 + 12/d), then summary lines: full
# recompute's activation bytes as a fraction of no recompute's, and bf16's as
# a fraction of fp32's.
# Data: Tiny Shakespeare from ../shared/data (characters; the vocabulary is
# padded to GPT-2's 50304 rows so the embedding and logits have GPT-2's shape).
set -euo pipefail
cd "$(dirname "$0")/.."
src=../shared/data/tinyshakespeare.txt
[ -f "$src" ] || { echo "error: $src is absent; this benchmark needs ../shared/data" >&2; exit 1; }
source scripts/mpi_env.sh
out=runs/bench_memory
mkdir -p "$out"
./build/megatron preprocess --overwrite --input "$src" --output-prefix "$out/shakespeare" >/dev/null
common=(--data-path "$out/shakespeare_text_document" --vocab-file "$out/shakespeare_vocab.json"
        --num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024
        --micro-batch-size 1 --train-iters 1 --lr 1e-4 --split 98,2,0 --eval-interval 0
        --peak-tflops 1 --log-memory)
run() {  # name, ranks, Megatron's bytes per parameter, extra flags...
  local name=$1 ranks=$2 formula=$3
  shift 3
  rm -f "$out/$name.jsonl"
  if [ "$ranks" = 1 ]; then
    OMP_NUM_THREADS=2 ./build/megatron train "${common[@]}" "$@" --log-json "$out/$name.jsonl" >"$out/$name.log" 2>&1
  else
    mpirun -n "$ranks" --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 \
      ./build/megatron train "${common[@]}" "$@" --log-json "$out/$name.jsonl" >"$out/$name.log" 2>&1
  fi
  python3 - "$name" "$out/$name.jsonl" "$formula" "$*" <<'PY'
import json, sys
name, path, formula, flags = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
mem = next(j["memory"] for j in map(json.loads, open(path)) if j.get("rank") == 0 and "memory" in j)
classes = {k: v for k, v in mem.items() if isinstance(v, dict)}
params = mem["params"]["predicted_bytes"] / (2 if "--bf16" in flags else 4)  # rank 0's elements
state = lambda k: sum(mem[c][k] for c in ("params", "grads", "optimizer"))  # noqa: E731
print(json.dumps({"bench": "memory", "impl": "megatron.cpp", "layout": name, "rank": 0,
                  "predicted_mb": {k: round(v["predicted_bytes"] / 1e6, 2) for k, v in classes.items()},
                  "measured_mb": {k: round(v["measured_bytes"] / 1e6, 2) for k, v in classes.items()},
                  "ratio": {k: (round(v["ratio"], 4) if v["ratio"] is not None else None)
                            for k, v in classes.items()},
                  "bytes_per_param_measured": round(state("measured_bytes") / params, 3),
                  "bytes_per_param_predicted": round(state("predicted_bytes") / params, 3),
                  "bytes_per_param_megatron": formula,
                  "peak_rss_mb": round(mem["peak_rss_bytes"] / 1e6, 1)}))
PY
}
whole=(--make-vocab-size-divisible-by 50304)
run plain 1 16 "${whole[@]}"
run zero1_dp2 2 12 "${whole[@]}" --use-distributed-optimizer
run zero1_dp4 4 10 "${whole[@]}" --use-distributed-optimizer
run tp2_sp 2 16 --make-vocab-size-divisible-by 25152 --tensor-model-parallel-size 2 --sequence-parallel
run tp2_sp_selective 2 16 --make-vocab-size-divisible-by 25152 --tensor-model-parallel-size 2 \
  --sequence-parallel --recompute-granularity selective
run full_recompute 1 16 "${whole[@]}" --recompute-granularity full \
  --recompute-method uniform --recompute-num-layers 1
run bf16 1 18 "${whole[@]}" --bf16
run bf16_zero1_dp2 2 12 "${whole[@]}" --bf16 --use-distributed-optimizer
run bf16_zero1_dp4 4 9 "${whole[@]}" --bf16 --use-distributed-optimizer
python3 - "$out" <<'PY'
import json, sys
def mem(name):
    path = f"{sys.argv[1]}/{name}.jsonl"
    return next(j["memory"] for j in map(json.loads, open(path)) if j.get("rank") == 0 and "memory" in j)
m = lambda r, c: r[c]["measured_bytes"]  # noqa: E731
p = lambda r, c: r[c]["predicted_bytes"]  # noqa: E731
plain, full, bf16 = mem("plain"), mem("full_recompute"), mem("bf16")
print(json.dumps({"bench": "memory_recompute", "impl": "megatron.cpp",
                  "activations_full_over_none_measured":
                      round(m(full, "activations") / m(plain, "activations"), 4),
                  "activations_full_over_none_predicted":
                      round(p(full, "activations") / p(plain, "activations"), 4),
                  "activations_plus_workspace_full_over_none_measured":
                      round((m(full, "activations") + m(full, "workspace")) /
                            (m(plain, "activations") + m(plain, "workspace")), 4)}))
print(json.dumps({"bench": "memory_bf16_activations", "impl": "megatron.cpp",
                  "activations_bf16_over_fp32_measured":
                      round(m(bf16, "activations") / m(plain, "activations"), 4),
                  "activations_bf16_over_fp32_predicted":
                      round(p(bf16, "activations") / p(plain, "activations"), 4)}))
PY
