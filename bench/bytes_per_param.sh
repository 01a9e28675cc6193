#!/usr/bin/env bash
# Bytes per parameter (weights + gradients + optimizer state) and saved
# activation bytes, measured by `megatron train --log-memory` (resident bytes
# of each class's buffers on rank 0) for GPT-2 small (12 layers, hidden 768,
# 12 heads, seq 1024, micro-batch 1, vocabulary padded to 50304), one
# iteration per row:
#   fp32 | bf16 | fp32 + ZeRO DP=2, 4 | bf16 + ZeRO DP=2, 4
# next to Megatron-LM's formula (Megatron Core docs, "Distributed Optimizer";
# d = DP size): fp32 params + fp32 grads 16, or 8 + 8/d with the distributed
# optimizer (the fp32 weights are the main weights, replicated); bf16 params +
# fp32 grads 18, or 6 + 12/d.
# Prints one JSON line per row and a summary line with bf16's activation bytes
# as a fraction of fp32's. Data: Tiny Shakespeare from ../shared/data.
set -euo pipefail
cd "$(dirname "$0")/.."
src=../shared/data/tinyshakespeare.txt
[ -f "$src" ] || { echo "error: $src is absent; this benchmark needs ../shared/data" >&2; exit 1; }
source scripts/mpi_env.sh
out=runs/bench_bytes_per_param
mkdir -p "$out"
./build/megatron preprocess --input "$src" --output-prefix "$out/shakespeare" >/dev/null
common=(--data-path "$out/shakespeare_text_document" --vocab-file "$out/shakespeare_vocab.json"
        --num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024
        --micro-batch-size 1 --train-iters 1 --lr 1e-4 --split 98,2,0 --eval-interval 0
        --peak-tflops 1 --log-memory --make-vocab-size-divisible-by 50304)
run() {  # name, ranks, megatron formula (bytes per parameter), extra flags...
  local name=$1 ranks=$2 formula=$3
  shift 3
  rm -f "$out/$name.jsonl"
  if [ "$ranks" = 1 ]; then
    OMP_NUM_THREADS=2 ./build/megatron train "${common[@]}" --global-batch-size 1 "$@" \
      --log-json "$out/$name.jsonl" >"$out/$name.log" 2>&1
  else
    mpirun -n "$ranks" --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 \
      ./build/megatron train "${common[@]}" --global-batch-size "$ranks" "$@" \
      --log-json "$out/$name.jsonl" >"$out/$name.log" 2>&1
  fi
  python3 - "$name" "$out/$name.jsonl" "$formula" "$*" <<'PY'
import json, sys
name, path, formula, flags = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
mem = next(j["memory"] for j in map(json.loads, open(path)) if j.get("rank") == 0 and "memory" in j)
weight_bytes = 2 if "--bf16" in flags else 4
params = mem["params"]["predicted_bytes"] / weight_bytes  # this rank's parameter elements
state = lambda k: sum(mem[c][k] for c in ("params", "grads", "optimizer"))  # noqa: E731
print(json.dumps({"bench": "bytes_per_param", "impl": "megatron.cpp", "layout": name,
                  "params": int(params),
                  "bytes_per_param_measured": round(state("measured_bytes") / params, 3),
                  "bytes_per_param_predicted": round(state("predicted_bytes") / params, 3),
                  "megatron_formula": formula,
                  "activations_mb_measured": round(mem["activations"]["measured_bytes"] / 1e6, 1),
                  "activations_mb_predicted": round(mem["activations"]["predicted_bytes"] / 1e6, 1),
                  "peak_rss_mb": round(mem["peak_rss_bytes"] / 1e6, 1)}))
PY
}
run fp32 1 16
run bf16 1 18 --bf16
run fp32_zero_dp2 2 12 --use-distributed-optimizer
run fp32_zero_dp4 4 10 --use-distributed-optimizer
run bf16_zero_dp2 2 12 --bf16 --use-distributed-optimizer
run bf16_zero_dp4 4 9 --bf16 --use-distributed-optimizer
python3 - "$out" <<'PY'
import json, sys
def mem(name):
    path = f"{sys.argv[1]}/{name}.jsonl"
    return next(j["memory"] for j in map(json.loads, open(path)) if j.get("rank") == 0 and "memory" in j)
f, b = mem("fp32"), mem("bf16")
print(json.dumps({"bench": "bf16_activations", "impl": "megatron.cpp",
                  "activations_bf16_over_fp32_measured":
                      round(b["activations"]["measured_bytes"] / f["activations"]["measured_bytes"], 4),
                  "activations_bf16_over_fp32_predicted":
                      round(b["activations"]["predicted_bytes"] / f["activations"]["predicted_bytes"], 4)}))
PY
