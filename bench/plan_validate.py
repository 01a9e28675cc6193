#!/usr/bin/env python3
"""megatron plan's step time against `megatron train` measured on this machine.

Calibrates a cpu-here profile once per rank count R (`mpirun -n R megatron
plan --calibrate`, as R training ranks share the host), then for each layout
of GPT-2 small (config b of bench_train) and of the small config (6 layers, hidden 384, seq 256) runs `megatron train` for a few
iterations and `megatron plan --json` pinned to the same layout, and prints
one JSON line per layout: predicted and measured tokens/s and the error; then
a summary line with the median and worst absolute error.

Data: ../shared/data's Tiny Shakespeare (character ids < 65) read through
NullTokenizer with --vocab-size 50256, so the vocabulary is GPT-2's (50257,
padded to 50304). Meaningful only on an otherwise idle machine.

Usage: python3 bench/plan_validate.py [build dir] [iterations] [layouts]
  (default build 8 all; layouts: comma-separated indices into LAYOUTS, e.g.
  0,1,2, to split the run into parts of a few minutes each)
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
ITERS = int(sys.argv[2]) if len(sys.argv) > 2 else 8
PICK = [int(x) for x in sys.argv[3].split(",")] if len(sys.argv) > 3 else None
BIN = os.path.join(BUILD, "megatron")
DATA = os.path.join(ROOT, "..", "shared", "data", "megatron-indexed", "tinyshakespeare_text_document")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMP_WAIT_POLICY="passive")
CORES = os.cpu_count() or 2

MODELS = {
    "small": ["--num-layers", "6", "--hidden-size", "384", "--num-attention-heads", "6",
              "--seq-length", "256"],
    "gpt2": ["--num-layers", "12", "--hidden-size", "768", "--num-attention-heads", "12",
             "--seq-length", "1024"],
}
# (model, ranks, micro-batch, global batch, layout flags shared by train and plan)
LAYOUTS = [
    ("small", 1, 8, 16, []),
    ("small", 1, 8, 16, ["--recompute-granularity", "full"]),
    ("small", 2, 8, 16, ["--tensor-model-parallel-size", "2", "--sequence-parallel"]),
    ("small", 2, 8, 32, ["--use-distributed-optimizer"]),
    ("small", 2, 8, 32, ["--pipeline-model-parallel-size", "2"]),
    ("small", 4, 8, 32, ["--tensor-model-parallel-size", "2"]),
    ("small", 4, 8, 64, ["--pipeline-model-parallel-size", "2", "--bf16"]),
    ("gpt2", 1, 1, 2, ["--bf16"]),
    ("gpt2", 2, 1, 2, ["--tensor-model-parallel-size", "2", "--sequence-parallel"]),
    ("gpt2", 2, 1, 4, ["--bf16", "--use-distributed-optimizer"]),
]


def threads(ranks):
    return max(CORES // ranks, 1)


def launcher(ranks):
    return ["mpirun", "--oversubscribe", "--bind-to", "none", "-n", str(ranks),
            "-x", f"OMP_NUM_THREADS={threads(ranks)}", "-x", "OMP_WAIT_POLICY"]


def calibrate(ranks, out):
    r = subprocess.run(launcher(ranks) + [BIN, "plan", "--calibrate", "--output", out],
                       env=ENV, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        sys.exit(f"calibration on {ranks} ranks failed:\n{r.stdout}\n{r.stderr}")


def train_flags(layout):
    flags = list(layout)
    if "--recompute-granularity" in flags:
        flags += ["--recompute-method", "uniform", "--recompute-num-layers", "1"]
    return flags


def measure(model, ranks, mbs, gbs, layout, tmp):
    log = os.path.join(tmp, "train.json")
    if os.path.exists(log):
        os.remove(log)
    cmd = launcher(ranks) + [BIN, "train"] + MODELS[model] + train_flags(layout) + [
        "--micro-batch-size", str(mbs), "--global-batch-size", str(gbs),
        "--train-iters", str(ITERS), "--log-interval", "1", "--eval-interval", "0",
        "--lr", "1e-4", "--split", "100,0,0", "--data-path", DATA,
        "--tokenizer-type", "NullTokenizer", "--vocab-size", "50256",
        "--peak-tflops", "1", "--log-json", log]
    r = subprocess.run(cmd, env=ENV, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        sys.exit(f"train failed: {' '.join(cmd)}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    ms = []
    with open(log) as f:
        for line in f:
            j = json.loads(line)
            if "ms_per_iter" in j and j.get("iteration", 0) > 2:  # after warm-up
                ms.append(j["ms_per_iter"])
    # Best and median iteration: calibration takes each GEMM's best run, so
    # the best iteration is the like-for-like number on a shared host (other
    # work only slows a run); the median is reported beside it.
    return min(ms) / 1e3, statistics.median(ms) / 1e3


def predict(model, ranks, mbs, gbs, layout, profile):
    pins = [x for x in layout if x != "--recompute-granularity" and x != "full"]
    pins += ["--recompute-granularity", "full" if "full" in layout else "selective"]
    pins += [] if "--bf16" in layout else ["--fp32"]
    for flag in ("--tensor-model-parallel-size", "--pipeline-model-parallel-size"):
        if flag not in pins:
            pins += [flag, "1"]
    cmd = [BIN, "plan"] + MODELS[model] + pins + [
        "--vocab-size", "50257", "--micro-batch-size", str(mbs), "--global-batch-size", str(gbs),
        "--num-nodes", "1", "--devices-per-node", str(ranks), "--device", profile,
        "--json", "--top", "0"]
    r = subprocess.run(cmd, env=ENV, capture_output=True, text=True)
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    want_sp = "--sequence-parallel" in layout
    want_zero = "--use-distributed-optimizer" in layout
    lines = [j for j in lines if j["vp"] == 1 and j["sequence_parallel"] == want_sp
             and j["distributed_optimizer"] == want_zero]
    if not lines:
        sys.exit(f"plan found no such layout: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return lines[0]


def main():
    if not os.path.exists(DATA + ".bin"):
        sys.exit(f"missing {DATA}.bin (../shared/data)")
    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (model, ranks, mbs, gbs, layout) in enumerate(LAYOUTS):
            if PICK is not None and i not in PICK:
                continue
            profile = os.path.join(tmp, f"cpu-here-{ranks}.json")
            if not os.path.exists(profile):
                calibrate(ranks, profile)
            p = predict(model, ranks, mbs, gbs, layout, profile)
            best, median = measure(model, ranks, mbs, gbs, layout, tmp)
            tokens = gbs * int(MODELS[model][7])
            measured = tokens / best
            err = p["tokens_per_s"] / measured - 1
            errors.append(abs(err))
            print(json.dumps({"index": i, "model": model, "ranks": ranks, "threads": threads(ranks),
                              "micro_batch_size": mbs, "global_batch_size": gbs,
                              "layout": " ".join(layout) or "(1 rank)",
                              "predicted_tokens_per_s": round(p["tokens_per_s"], 1),
                              "measured_tokens_per_s": round(measured, 1),
                              "measured_median_tokens_per_s": round(tokens / median, 1),
                              "error": round(err, 4),
                              "predicted_step_s": round(p["step_time_s"], 3),
                              "measured_step_s": round(best, 3)}), flush=True)
    print(json.dumps({"layouts": len(errors), "median_abs_error": round(statistics.median(errors), 4),
                      "worst_abs_error": round(max(errors), 4)}))


if __name__ == "__main__":
    main()
