#!/usr/bin/env python3
"""The seed table for docs/plan.md: for each seed model (seq 2048, bf16,
distributed optimizer, micro-batch 1, global batch 1024, TP+SP, A100-80GB),
`megatron plan`'s memory of the most loaded rank at the seed's layout beside
Megatron-LM's published estimate (megatron/training/theoretical_memory_usage.py:
weight+optimizer; activations of its sequence-parallel + selective branch,
Korthikanti et al. Table 2), then plan's best layout on the same GPUs.

Megatron's formulas are evaluated from their documented terms (written here,
not copied). Usage: python3 dev/plan_seed_table.py [path/to/megatron]"""
import json
import os
import subprocess
import sys

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/megatron"
LLAMA = ["--normalization", "RMSNorm", "--position-embedding-type", "rope", "--swiglu",
         "--disable-bias-linear", "--untie-embeddings-and-output-weights"]
# name, llama, layers, hidden, heads, groups, ffn, tp, pp, dp
SEEDS = [
    ("7B", True, 32, 4096, 32, 32, 11008, 1, 1, 8),
    ("13B", True, 40, 5120, 40, 40, 13824, 2, 1, 8),
    ("20B", False, 40, 6144, 48, 48, 4 * 6144, 4, 1, 8),
    ("40B", False, 48, 8192, 64, 64, 4 * 8192, 8, 2, 4),
    ("70B", True, 80, 8192, 64, 8, 28672, 8, 4, 4),
    ("175B", False, 96, 12288, 96, 96, 4 * 12288, 8, 4, 4),
]
S, GBS, MBS = 2048, 1024, 1


def padded(v, tp):
    m = 128 * tp
    return (v + m - 1) // m * m


def model_flags(seed):
    name, llama, L, h, a, g, f, tp, pp, dp = seed
    flags = ["--num-layers", L, "--hidden-size", h, "--num-attention-heads", a,
             "--ffn-hidden-size", f, "--seq-length", S, "--vocab-size", 32000 if llama else 50257]
    if llama:
        flags += LLAMA
        if g != a:
            flags += ["--group-query-attention", "--num-query-groups", g]
    return [str(x) for x in flags]


def plan(seed, pinned):
    name, llama, L, h, a, g, f, tp, pp, dp = seed
    world = tp * pp * dp
    cmd = [BIN, "plan"] + model_flags(seed) + [
        "--global-batch-size", str(GBS), "--num-nodes", str(max(world // 8, 1)),
        "--devices-per-node", str(min(world, 8)), "--device", "a100-80gb", "--json", "--top", "0" if pinned else "1",
        "--bf16"]
    if pinned:
        cmd += ["--tensor-model-parallel-size", str(tp), "--pipeline-model-parallel-size", str(pp),
                "--micro-batch-size", str(MBS), "--use-distributed-optimizer",
                "--recompute-granularity", "selective"] + (["--sequence-parallel"] if tp > 1 else [])
    out = subprocess.run(cmd, capture_output=True, text=True)
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    if pinned:  # the one without interleaving
        lines = [x for x in lines if x["vp"] == 1] or lines
    if not lines:
        sys.exit(f"{name}: {' '.join(cmd)}\n{out.stderr}")
    return lines[0]


def megatron(seed):
    name, llama, L, h, a, g, f, tp, pp, dp = seed
    v = padded(32000 if llama else 50257, tp)
    norm = 1 if llama else 2
    layer = 2 * h * h * (1 + g / a) + 2 * h * (f * (1.5 if llama else 1) + norm)
    block = layer * L + norm * h
    emb = h * v
    shard = (block / pp + emb) / tp + (emb / tp if llama and pp == 1 else 0)
    weight = shard * (6 + 12 / dp)
    m = GBS // (MBS * dp)
    act = S * MBS * h * (18 + 4 * f / h) * L + 8 * S * MBS * pp + S * MBS * h * pp
    if pp > 1:
        act *= min(1, m / pp)
    else:
        act += S * MBS * h * 4 * (1 + v / h)
    return weight, act / tp


def gb(x):
    return f"{x / 1e9:.2f}"


print("| model | layout (TP PP DP) | weight+optimizer: plan | Megatron | plan/Megatron "
      "| activations: plan | Megatron | total: plan | Megatron |")
print("|---|---|---|---|---|---|---|---|---|")
best_rows = []
for seed in SEEDS:
    ours = plan(seed, True)
    w, act = megatron(seed)
    mem = ours["memory"]
    print(f"| {seed[0]} | TP{seed[7]} PP{seed[8]} DP{seed[9]} | {gb(mem['weight_and_optimizer_bytes'])} "
          f"| {gb(w)} | {mem['weight_and_optimizer_bytes'] / w:.4f} | {gb(mem['activation_bytes'])} "
          f"| {gb(act)} | {gb(mem['total_bytes'])} | {gb(w + act)} |")
    best_rows.append((seed, ours, plan(seed, False)))
print()
print("| model | GPUs | seed layout | its tokens/s, MFU (plan) | plan's best | tokens/s, MFU | memory GB |")
print("|---|---|---|---|---|---|---|")
for seed, ours, best in best_rows:
    lay = (f"TP{best['tp']} PP{best['pp']}" + (f" VP{best['vp']}" if best['vp'] > 1 else "") +
           f" DP{best['dp']} mbs{best['micro_batch_size']}" + (" SP" if best['sequence_parallel'] else "") +
           (" full-recompute" if best['recompute'] == 'full' else "") +
           (" ZeRO-1" if best['distributed_optimizer'] else ""))
    print(f"| {seed[0]} | {seed[7] * seed[8] * seed[9]} | TP{seed[7]} PP{seed[8]} DP{seed[9]} "
          f"| {ours['tokens_per_s']:.0f}, {100 * ours['mfu']:.1f}% | {lay} "
          f"| {best['tokens_per_s']:.0f}, {100 * best['mfu']:.1f}% | {gb(best['memory']['total_bytes'])} |")
