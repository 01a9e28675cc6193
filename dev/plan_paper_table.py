#!/usr/bin/env python3
"""megatron plan's A100 predictions beside Narayanan et al. 2021 ("Efficient
Large-Scale Language Model Training on GPU Clusters Using Megatron-LM",
arXiv 2104.04473): per-GPU teraFLOP/s of GPT models on DGX A100 nodes
(8 x A100-80GB, NVLink inside, 8 x 200 Gb/s InfiniBand between), seq 2048,
vocabulary 51,200, fp16 mixed precision (312 TFLOP/s peak, as bf16), full
activation recomputation, no sequence parallelism or distributed optimizer
(neither existed then). The paper counts FLOPs with its Eq. (3), which
includes the recomputed forward: 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)); the
same formula is applied here to plan's step time. Micro-batch size and
virtual stages are left to plan (the paper does not list them per row).

Usage: python3 dev/plan_paper_table.py [path/to/megatron]"""
import json
import subprocess
import sys

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/megatron"
# source, params (B), layers, hidden, heads, tp, pp, gpus, batch, paper TFLOP/s per GPU
ROWS = [
    ("Table 2 (PTD-P, 384 GPUs)", 174.6, 96, 12288, 96, 8, 12, 384, 1536, 153),
    ("Table 2 (PTD-P, 1536 GPUs)", 174.6, 96, 12288, 96, 8, 12, 1536, 1536, 141),
    ("Table 1", 145.6, 80, 12288, 96, 8, 8, 1536, 2304, 148),
    ("Table 1", 529.6, 105, 20480, 128, 8, 35, 2520, 2520, 163),
    ("Table 1", 1008.0, 128, 25600, 160, 8, 64, 3072, 3072, 163),
]
S, V = 2048, 51200

print("| model (B) | source | TP | PP | GPUs | batch | paper TFLOP/s per GPU | plan: layout chosen | plan TFLOP/s per GPU | plan / paper |")
print("|---|---|---|---|---|---|---|---|---|---|")
ratios = []
for src, p, L, h, a, tp, pp, gpus, batch, paper in ROWS:
    cmd = [BIN, "plan", "--num-layers", str(L), "--hidden-size", str(h),
           "--num-attention-heads", str(a), "--seq-length", str(S), "--vocab-size", str(V),
           "--make-vocab-size-divisible-by", "128", "--global-batch-size", str(batch),
           "--num-nodes", str(gpus // 8), "--devices-per-node", "8", "--device", "a100-80gb",
           "--tensor-model-parallel-size", str(tp), "--pipeline-model-parallel-size", str(pp),
           "--recompute-granularity", "full", "--bf16", "--json", "--top", "0"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    lines = [j for j in lines if not j["sequence_parallel"] and not j["distributed_optimizer"]]
    if not lines:
        sys.exit(f"no layout: {' '.join(cmd)}\n{r.stderr}")
    # The fastest that fits this program's memory; else the fastest (the
    # paper's runs fit Megatron-LM's, which keeps fewer tensors than this
    # program under full recompute), said in the table.
    fitting = [j for j in lines if j["fits"]]
    best = max(fitting or lines, key=lambda j: j["tokens_per_s"])
    eq3 = 96 * batch * S * L * h * h * (1 + S / (6 * h) + V / (16 * L * h))
    tflops = eq3 / best["step_time_s"] / gpus / 1e12
    ratios.append(tflops / paper)
    lay = f"mbs {best['micro_batch_size']}, VP {best['vp']}, m {best['num_micro_batches']}"
    if not best["fits"]:
        lay += f" (needs {best['memory']['total_bytes'] / 1e9:.0f} GB here)"
    print(f"| {p} | {src} | {tp} | {pp} | {gpus} | {batch} | {paper} | {lay} | {tflops:.0f} | {tflops / paper:.2f} |")
print()
print(f"worst |plan/paper - 1|: {max(abs(x - 1) for x in ratios):.3f}")
