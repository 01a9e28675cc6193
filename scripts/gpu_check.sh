#!/usr/bin/env bash
# The whole GPU check of the CUDA backend, in one script for a lent GPU
# machine (an H100 with the CUDA toolkit and PyTorch, none of Debian's
# packages): under 8 minutes. Prepare its inputs first where the build tools
# are (bash scripts/gpu_bundle.sh: build-gpu-bundle/), carry that folder, run
#   bash scripts/gpu_check.sh [build-gpu-bundle]
# Steps: the CUDA twins against their CPU code (kernels_cuda_tests); CPU vs
# GPU losses over 20 iterations with dropout (GPT-2 and Llama shapes, fp32;
# bf16 against the CPU's bf16); GPT-2 small (seq 1024, bf16) tokens/s and MFU
# against the cuBLASLt bf16 peak, beside PyTorch eager and torch.compile on
# the same GPU. Logs go to /tmp/gpu_check (and, when $OUT is set, a tarball
# of them and the summary to $OUT); the last line is one JSON object with
# "ok" and the figures.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-gpu-bundle}
RESULTS=${OUT:-}
OUT=/tmp/gpu_check
rm -rf "$OUT" && mkdir -p "$OUT"
B=$(cd "$B" && pwd)
t0=$(date +%s)
note() { echo "[gpu_check $(( $(date +%s) - t0 ))s] $*"; }

# Runtime libraries the machine lacks, beside the binaries; Open MPI's plugins
# where its library looks for them.
mkdir -p "$B/lib" && tar -xzf "$B/libs.tar.gz" -C "$B/lib" --strip-components=0 2>/dev/null
find "$B/lib" -name '*.so*' -exec mv -f {} "$B/lib/" \; 2>/dev/null
tar -xzf "$B/openmpi.tar.gz" -C / --skip-old-files 2>/dev/null
cuda_libs=$(python3 - <<'PY' 2>/dev/null
import glob, os, site
dirs = set()
for s in site.getsitepackages():
    for p in glob.glob(os.path.join(s, "nvidia", "**", "lib"), recursive=True):
        dirs.add(p)
print(":".join(sorted(dirs)))
PY
)
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64:${cuda_libs}:${LD_LIBRARY_PATH:-}"
export OMPI_MCA_ess_singleton_isolated=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mca_base_component_show_load_errors=0 OMP_NUM_THREADS=${OMP_NUM_THREADS:-16}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
ldd "$B/bin/megatron" | grep -i "not found" | tee "$OUT/ldd_missing.txt"

# 1. The CUDA twins against their CPU code.
note "kernels_cuda_tests"
timeout 240 "$B/bin/kernels_cuda_tests" --gtest_brief=1 >"$OUT/cuda_tests.log" 2>&1
tests_rc=$?
tail -n 30 "$OUT/cuda_tests.log"

# 2. CPU vs GPU losses (20 iterations, dropout on).
D="$B/data/tinyshakespeare_text_document"
common="--data-path $D --vocab-file $B/data/vocab.json --split 98,2,0 --seed 1234 --lr 1e-3
 --lr-warmup-iters 2 --train-iters 20 --log-interval 1 --eval-interval 0 --clip-grad 1.0
 --weight-decay 0.1 --hidden-dropout 0.1 --attention-dropout 0.1 --num-layers 2 --hidden-size 128
 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 4
 --global-batch-size 8"
llama="--normalization RMSNorm --position-embedding-type rope --swiglu --ffn-hidden-size 256
 --group-query-attention --num-query-groups 2 --disable-bias-linear --untie-embeddings-and-output-weights"
train() {  # name device extra...
  local name=$1 dev=$2; shift 2
  rm -f "$OUT/$name.$dev.jsonl"
  timeout 180 "$B/bin/megatron" train $common --device "$dev" --log-json "$OUT/$name.$dev.jsonl" "$@" \
    >"$OUT/$name.$dev.log" 2>&1 || { echo "train $name $dev failed:"; tail -n 5 "$OUT/$name.$dev.log"; }
}
for cfg in gpt2 llama gpt2_bf16 llama_bf16; do
  extra=""
  case $cfg in llama*) extra=$llama ;; esac
  case $cfg in *bf16) extra="$extra --bf16" ;; esac
  note "losses $cfg"
  train "$cfg" cpu $extra
  train "$cfg" cuda $extra
done

# 3. Speed: GPT-2 small, seq 1024, bf16, micro-batch 8 (ids from the char corpus:
# the speed does not depend on them; vocabulary 50257 as GPT-2's).
note "bench megatron.cpp"
small="--data-path $D --tokenizer-type NullTokenizer --vocab-size 50256 --split 98,2,0 --seed 1234
 --num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024
 --max-position-embeddings 1024 --micro-batch-size 8 --global-batch-size 8 --train-iters 30
 --log-interval 1 --eval-interval 0 --lr 3e-4 --clip-grad 1.0 --weight-decay 0.1 --bf16"
timeout 240 "$B/bin/megatron" train $small --device cuda --log-json "$OUT/bench.cuda.jsonl" \
  >"$OUT/bench.cuda.log" 2>&1 || { echo "bench failed:"; tail -n 5 "$OUT/bench.cuda.log"; }
note "bench pytorch"
# (MT_GPU_CHECK_COMPILE=0 leaves out torch.compile: a minute of compiling.)
modes="eager"; [ "${MT_GPU_CHECK_COMPILE:-1}" = 1 ] && modes="eager compile"
for mode in $modes; do
  flag=""; [ $mode = compile ] && flag="--compile"
  timeout 200 python3 "$B/pytorch_gpt_cuda.py" --micro-batch-size 8 --iters 20 --warmup 5 \
    --measure-peak $flag >"$OUT/torch_$mode.log" 2>&1 || tail -n 5 "$OUT/torch_$mode.log"
done

# 4. The verdict.
note "summary"
python3 - "$OUT" "$tests_rc" <<'PY'
import json, os, statistics, sys
out, tests_rc = sys.argv[1], int(sys.argv[2])
def jl(path):
    try:
        return [json.loads(l) for l in open(path) if l.strip().startswith("{")]
    except OSError:
        return []
def losses(name, dev):
    return [r["loss"] for r in jl(f"{out}/{name}.{dev}.jsonl") if "loss" in r and "iteration" in r]
res = {"ok": True, "cuda_tests_rc": tests_rc}
if tests_rc != 0: res["ok"] = False
log = open(f"{out}/cuda_tests.log").read() if os.path.exists(f"{out}/cuda_tests.log") else ""
res["cuda_tests_failed"] = [l.split("]", 1)[1].strip() for l in log.splitlines() if l.startswith("[  FAILED  ]")][:20]
tol = {"gpt2": 1e-4, "llama": 1e-4, "gpt2_bf16": 1e-2, "llama_bf16": 1e-2}
for name, t in tol.items():
    c, g = losses(name, "cpu"), losses(name, "cuda")
    if len(c) != 20 or len(g) != 20:
        res[name] = {"error": f"{len(c)} cpu / {len(g)} cuda losses"}; res["ok"] = False; continue
    rel = max(abs(a - b) / abs(a) for a, b in zip(c, g))
    res[name] = {"max_rel_loss_diff": rel, "tol": t, "cpu_last": c[-1], "cuda_last": g[-1]}
    if not rel <= t: res["ok"] = False
b = [r for r in jl(f"{out}/bench.cuda.jsonl") if "tokens_per_s" in r][5:]
if b:
    res["megatron_cpp"] = {"tokens_per_s": statistics.median(r["tokens_per_s"] for r in b),
                           "mfu": statistics.median(r["mfu"] for r in b),
                           "ms_per_iter": statistics.median(r["ms_per_iter"] for r in b)}
else:
    res["ok"] = False
for mode in ("eager", "compile"):
    t = jl(f"{out}/torch_{mode}.log")
    if t: res["pytorch_" + mode] = {k: t[-1].get(k) for k in ("tokens_per_s", "mfu", "peak_tflops", "ms_per_iter_median")}
if "megatron_cpp" in res and "pytorch_eager" in res and res["pytorch_eager"]["tokens_per_s"]:
    res["speed_vs_eager"] = res["megatron_cpp"]["tokens_per_s"] / res["pytorch_eager"]["tokens_per_s"]
open(f"{out}/summary.json", "w").write(json.dumps(res) + "\n")
PY
if [ -n "$RESULTS" ]; then
  tar -czf "$RESULTS/gpu_check_logs.tgz" -C /tmp gpu_check
  cp "$OUT/summary.json" "$RESULTS/" 2>/dev/null
fi
tail -n 1 "$OUT/summary.json" 2>/dev/null
