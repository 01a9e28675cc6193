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
[ -d "$B/bin" ] || tar -xzf "$B/bin.tar.gz" -C "$B"
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
# Only our binaries see the carried libraries (PyTorch keeps the machine's own).
MT_LD="$B/lib:/usr/local/cuda/lib64:${cuda_libs}:${LD_LIBRARY_PATH:-}"
mt() { LD_LIBRARY_PATH="$MT_LD" "$@"; }
export OMPI_MCA_ess_singleton_isolated=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mca_base_component_show_load_errors=0 OMP_NUM_THREADS=${OMP_NUM_THREADS:-16}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
mt ldd "$B/bin/megatron" | grep -i "not found" | tee "$OUT/ldd_missing.txt"

# MT_GPU_CHECK_STEPS picks steps (default: tests losses ckpt bench torch; "profile"
# adds step 4).
steps=" ${MT_GPU_CHECK_STEPS:-tests losses ckpt bench torch} "
step() { [[ "$steps" == *" $1 "* ]]; }
tests_rc=0
cpu_tests_rc=0

# 1. The CUDA twins against their CPU code.
if step tests; then
note "kernels_cuda_tests"
mt timeout 150 "$B/bin/kernels_cuda_tests" --gtest_brief=1 >"$OUT/cuda_tests.log" 2>&1
tests_rc=$?
tail -n 30 "$OUT/cuda_tests.log"
[ -n "$RESULTS" ] && cp "$OUT/cuda_tests.log" "$RESULTS/"  # kept even if a later step overruns
# The CPU matmul tests on this machine's CPU (an AMX one on the H100 machines:
# oneDNN's AMX bf16 kernel multiplied some shapes wrongly; matmul.cc caps it).
mt timeout 120 "$B/bin/kernels_tests" --gtest_brief=1 --gtest_filter='Matmul*:Linear*' \
  >"$OUT/cpu_matmul_tests.log" 2>&1
cpu_tests_rc=$?
tail -n 4 "$OUT/cpu_matmul_tests.log"
fi

# 2. CPU vs GPU losses (20 iterations, dropout on).
D="$B/data/tinyshakespeare_text_document"
small="--data-path $D --tokenizer-type NullTokenizer --vocab-size 50256 --split 98,2,0 --seed 1234
 --num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024
 --max-position-embeddings 1024 --micro-batch-size 8 --global-batch-size 8 --train-iters 30
 --log-interval 1 --eval-interval 0 --lr 3e-4 --clip-grad 1.0 --weight-decay 0.1 --bf16
 --hidden-dropout 0 --attention-dropout 0"
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
  mt timeout 60 "$B/bin/megatron" train $common --device "$dev" --log-json "$OUT/$name.$dev.jsonl" "$@" \
    >"$OUT/$name.$dev.log" 2>&1 || { echo "train $name $dev failed:"; tail -n 5 "$OUT/$name.$dev.log"; }
}
if step losses; then
for cfg in gpt2 llama gpt2_bf16 llama_bf16 gpt2_fp16; do
  extra=""
  case $cfg in llama*) extra=$llama ;; esac
  case $cfg in *bf16) extra="$extra --bf16" ;; *fp16) extra="$extra --fp16" ;; esac
  note "losses $cfg"
  train "$cfg" cpu $extra
  train "$cfg" cuda $extra
done
# bf16 attention on each implementation (MT_CUDA_ATTENTION=fa|tc|simt).
MT_CUDA_ATTENTION=simt train gpt2_bf16_simt cuda --bf16
MT_CUDA_ATTENTION=fa train gpt2_bf16_fa cuda --bf16
MT_CUDA_ATTENTION=tc train gpt2_bf16_tc cuda --bf16
mt timeout 60 "$B/bin/kernels_cuda_tests" --gtest_also_run_disabled_tests \
  --gtest_filter='*DISABLED_Throughput*:*DISABLED_PeakFlopsReport*' >"$OUT/throughput.log" 2>&1
grep -iE "tflop|ms" "$OUT/throughput.log" | head -n 20
fi

# 2b. Checkpoints and evaluation on the GPU: a GPU run saved at iteration 10
# resumes on the GPU with the uninterrupted run's losses and on the CPU with
# the CPU's (the same files as CPU runs write); the validation loss matches the CPU's.
if step ckpt; then
  note "checkpoints"
  rm -rf "$OUT/ck" "$OUT/ck_cpu" "$OUT/ck_eval"
  # (--exit-interval: the 20-iteration run's learning-rate schedule, stopped at 10)
  train ckpt_a cuda --exit-interval 10 --save "$OUT/ck" --eval-interval 10 --eval-iters 2
  cp -r "$OUT/ck" "$OUT/ck_cpu"
  train ckpt_b cuda --load "$OUT/ck" --save "$OUT/ck"
  train ckpt_c cpu --load "$OUT/ck_cpu" --save "$OUT/ck_cpu"
  train ckpt_eval cpu --exit-interval 10 --save "$OUT/ck_eval" --eval-interval 10 --eval-iters 2
  rm -rf "$OUT/ck" "$OUT/ck_cpu" "$OUT/ck_eval"
fi

# 3. Speed: GPT-2 small, seq 1024, bf16, micro-batch 8, no dropout (ids from the
# char corpus: the speed does not depend on them; GPT-2's vocabulary of 50257).
if step bench; then
note "bench megatron.cpp"
for v in ${MT_BENCH_VARIANTS:-fa tc simt}; do
  MT_CUDA_ATTENTION=$v mt timeout 90 "$B/bin/megatron" train $small \
    --device cuda --log-json "$OUT/bench.$v.jsonl" >"$OUT/bench.$v.log" 2>&1 ||
    { echo "bench $v failed:"; tail -n 5 "$OUT/bench.$v.log"; }
done
fi
if step torch; then
note "bench pytorch"
# (MT_GPU_CHECK_COMPILE=0 leaves out torch.compile: a minute of compiling.)
modes="eager"; [ "${MT_GPU_CHECK_COMPILE:-1}" = 1 ] && modes="eager compile"
for mode in $modes; do
  flag=""; [ $mode = compile ] && flag="--compile"
  timeout 150 python3 "$B/pytorch_gpt_cuda.py" --micro-batch-size 8 --iters 20 --warmup 5 \
    --measure-peak $flag >"$OUT/torch_$mode.log" 2>&1 || tail -n 5 "$OUT/torch_$mode.log"
done
fi

# 4. Where a GPT-2 small step's GPU time goes (step "profile"): Nsight
# Compute's duration of every kernel of a 2-iteration run, summed by kernel name.
if step profile; then
  ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
  note "profile ($ncu_bin)"
  timeout ${MT_PROFILE_TIMEOUT:-100} env LD_LIBRARY_PATH="$MT_LD" "$ncu_bin" --metrics gpu__time_duration.sum \
    --csv --clock-control none "$B/bin/megatron" train ${small/--train-iters 30/--train-iters 2} \
    --device cuda >"$OUT/ncu.csv" 2>"$OUT/ncu.err"
  python3 - "$OUT/ncu.csv" <<'PY' | tee "$OUT/profile.txt"
import csv, collections, sys
tot, cnt = collections.defaultdict(float), collections.Counter()
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
for r in csv.DictReader(rows):
    if r.get("Metric Name") != "gpu__time_duration.sum": continue
    v = float(r["Metric Value"].replace(",", ""))
    unit = r.get("Metric Unit", "nsecond")
    v *= {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}.get(unit, 1e-6)
    name = r["Kernel Name"].split("(")[0][:90]
    tot[name] += v; cnt[name] += 1
all_ms = sum(tot.values())
print(f"kernels: {sum(cnt.values())} launches, {all_ms:.1f} ms GPU time in 2 iterations (incl. init)")
for k, v in sorted(tot.items(), key=lambda x: -x[1])[:40]:
    print(f"{v:9.2f} ms {cnt[k]:6d}x  {k}")
PY
fi

# 5. The verdict.
note "summary"
python3 - "$OUT" "$tests_rc" "$cpu_tests_rc" <<'PY'
import json, os, statistics, sys
out, tests_rc, cpu_tests_rc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def jl(path):
    try:
        return [json.loads(l) for l in open(path) if l.strip().startswith("{")]
    except OSError:
        return []
def losses(name, dev):
    return [r["loss"] for r in jl(f"{out}/{name}.{dev}.jsonl") if "loss" in r and "iteration" in r]
res = {"ok": True, "cuda_tests_rc": tests_rc, "cpu_matmul_tests_rc": cpu_tests_rc}
if tests_rc != 0 or cpu_tests_rc != 0: res["ok"] = False
log = open(f"{out}/cuda_tests.log").read() if os.path.exists(f"{out}/cuda_tests.log") else ""
res["cuda_tests_failed"] = [l.split("]", 1)[1].strip() for l in log.splitlines() if l.startswith("[  FAILED  ]")][:20]
# fp32: the GPU against the CPU; bf16: against the CPU's bf16 and the CPU's
# fp32 within the CPU bf16 tests' tolerance (1e-2 relative).
pairs = {"gpt2": ("gpt2", 1e-4), "llama": ("llama", 1e-4), "gpt2_bf16": ("gpt2_bf16", 1e-2),
         "gpt2_bf16_simt": ("gpt2_bf16", 1e-2), "gpt2_bf16_fa": ("gpt2_bf16", 1e-2),
         "gpt2_bf16_tc": ("gpt2_bf16", 1e-2), "gpt2_fp16": ("gpt2_fp16", 1e-2),
         "llama_bf16": ("llama_bf16", 1e-2), "gpt2_bf16_vs_cpu_fp32": ("gpt2", 1e-2),
         "llama_bf16_vs_cpu_fp32": ("llama", 1e-2)}
for name, (ref, t) in pairs.items():
    c, g = losses(ref, "cpu"), losses(name.split("_vs_")[0], "cuda")
    if len(c) != 20 or len(g) != 20:
        res[name] = {"error": f"{len(c)} cpu / {len(g)} cuda losses"}; res["ok"] = False; continue
    rel = max(abs(a - b) / abs(a) for a, b in zip(c, g))
    res[name] = {"max_rel_loss_diff": rel, "tol": t, "cpu_last": c[-1], "cuda_last": g[-1]}
    if not rel <= t: res["ok"] = False
def tail(name, dev, first):  # losses of iterations > first
    return [r["loss"] for r in jl(f"{out}/{name}.{dev}.jsonl") if "loss" in r and r.get("iteration", 0) > first]
def val(name, dev):
    v = [r["val_loss"] for r in jl(f"{out}/{name}.{dev}.jsonl") if "val_loss" in r]
    return v[-1] if v else None
if os.path.exists(f"{out}/ckpt_b.cuda.jsonl"):
    for key, (a, b, t) in {"resume_gpu": (tail("ckpt_b", "cuda", 10), tail("gpt2", "cuda", 10), 1e-6),
                           "resume_cpu_from_gpu": (tail("ckpt_c", "cpu", 10), tail("gpt2", "cpu", 10), 1e-4)}.items():
        if len(a) != 10 or len(b) != 10:
            res[key] = {"error": f"{len(a)} / {len(b)} losses"}; res["ok"] = False; continue
        rel = max(abs(x - y) / abs(y) for x, y in zip(a, b))
        res[key] = {"max_rel_loss_diff": rel, "tol": t}
        if not rel <= t: res["ok"] = False
    vg, vc = val("ckpt_a", "cuda"), val("ckpt_eval", "cpu")
    res["val_loss"] = {"cuda": vg, "cpu": vc}
    if vg is None or vc is None or not abs(vg - vc) <= 1e-4 * abs(vc): res["ok"] = False
for v in ("fa", "tc", "simt"):
    b = [r for r in jl(f"{out}/bench.{v}.jsonl") if "tokens_per_s" in r][5:]
    if b:
        res["megatron_cpp_" + v] = {"tokens_per_s": statistics.median(r["tokens_per_s"] for r in b),
                                    "mfu": statistics.median(r["mfu"] for r in b),
                                    "ms_per_iter": statistics.median(r["ms_per_iter"] for r in b)}
# The default attention's run (MT_CUDA_ATTENTION unset: src/kernels/cuda/attention_fa.h).
res["megatron_cpp"] = res.get("megatron_cpp_fa") or res.get("megatron_cpp_tc") or res.get("megatron_cpp_simt")
if not res["megatron_cpp"]: res["ok"] = False
for mode in ("eager", "compile"):
    t = jl(f"{out}/torch_{mode}.log")
    if t: res["pytorch_" + mode] = {k: t[-1].get(k) for k in ("tokens_per_s", "mfu", "peak_tflops", "ms_per_iter_median")}
if res.get("megatron_cpp") and "pytorch_eager" in res and res["pytorch_eager"]["tokens_per_s"]:
    res["speed_vs_eager"] = res["megatron_cpp"]["tokens_per_s"] / res["pytorch_eager"]["tokens_per_s"]
open(f"{out}/summary.json", "w").write(json.dumps(res) + "\n")
PY
if [ -n "$RESULTS" ]; then
  tar -czf "$RESULTS/gpu_check_logs.tgz" -C /tmp gpu_check
  cp "$OUT/summary.json" "$RESULTS/" 2>/dev/null
  cp "$OUT/profile.txt" "$RESULTS/" 2>/dev/null
fi
tail -n 1 "$OUT/summary.json" 2>/dev/null
