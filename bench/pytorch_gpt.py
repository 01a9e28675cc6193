#!/usr/bin/python3
"""PyTorch eager baseline for the megatron.cpp GPT benchmark.

The same model as megatron.cpp's GPT-2 (Megatron-core layout): learned word and
position embeddings, pre-LayerNorm blocks with a fused QKV projection (Megatron
per-head interleave), causal softmax attention written with matmul + masked
softmax (torch 1.13 has no scaled_dot_product_attention), GELU (tanh) MLP,
final LayerNorm, output layer tied to the word embeddings, vocabulary padded
to a multiple of 128, no dropout. Float32.

Each iteration trains on one random micro-batch: forward, mean cross-entropy,
backward, global-norm clipping (1.0) and an AdamW step (weight decay 0.1 on 2-D
weights and embeddings only, as Megatron). After --warmup untimed iterations,
--iters iterations are timed and one JSON line is printed:

  {"impl": "pytorch", "threads": 1, "tokens_per_s": ..., "ms_per_iter": ..., <config>}

Debian's torch (1.13) calls whatever libblas.so.3 the system provides for its
fp32 matmuls; Debian's default is the netlib reference BLAS (~2 GFLOP/s), which
makes no fair baseline. Point the loader at OpenBLAS instead (the "blas" field
of the output says which library was loaded; its thread count is set to
--threads):

  OMP_WAIT_POLICY=passive LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread \
      /usr/bin/python3 bench/pytorch_gpt.py --threads 1

(that directory comes with Debian's libopenblas0-pthread; without installing it,
`dpkg-deb -x libopenblas0-pthread_*.deb DIR` and use DIR/usr/lib/... instead).
Leave OPENBLAS_CORETYPE unset so OpenBLAS picks its AVX-512 kernels.
With 2 threads, torch's OpenMP threads and OpenBLAS's pthreads compete for the
cores; --blas-threads 1 keeps the matmuls single-threaded (with
OMP_WAIT_POLICY=active that was the fastest 2-thread setting measured).
"""

import argparse
import ctypes
import json
import math
import os
import platform
import statistics
import time

import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, hidden, heads, ffn, eps):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(hidden, eps=eps)
        self.qkv = torch.nn.Linear(hidden, 3 * hidden)  # rows: head*3*d + which*d + e
        self.proj = torch.nn.Linear(hidden, hidden)
        self.ln2 = torch.nn.LayerNorm(hidden, eps=eps)
        self.fc1 = torch.nn.Linear(hidden, ffn)
        self.fc2 = torch.nn.Linear(ffn, hidden)

    def forward(self, x, mask):
        # x: (b, s, h); mask: (s, s) bool, True above the diagonal (future)
        b, s, h = x.shape
        a = self.heads
        d = h // a
        qkv = self.qkv(self.ln1(x)).view(b, s, a, 3, d)
        q, k, v = (qkv[:, :, :, i, :].transpose(1, 2) for i in range(3))  # (b, a, s, d)
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d))  # (b, a, s, s)
        probs = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        ctx = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
        x = x + self.proj(ctx)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class Gpt(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h = cfg["hidden_size"]
        self.wte = torch.nn.Embedding(cfg["padded_vocab_size"], h)
        self.wpe = torch.nn.Embedding(cfg["seq_length"], h)
        self.blocks = torch.nn.ModuleList(
            Block(h, cfg["num_attention_heads"], cfg["ffn_hidden_size"], 1e-5)
            for _ in range(cfg["num_layers"]))
        self.lnf = torch.nn.LayerNorm(h, eps=1e-5)
        std = 0.02
        for name, p in self.named_parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                torch.nn.init.zeros_(p)
        # Megatron scales the output projections' init by 1/sqrt(2L).
        for blk in self.blocks:
            torch.nn.init.normal_(blk.proj.weight, 0.0, std / math.sqrt(2 * cfg["num_layers"]))
            torch.nn.init.normal_(blk.fc2.weight, 0.0, std / math.sqrt(2 * cfg["num_layers"]))
        self.register_buffer("positions", torch.arange(cfg["seq_length"]), persistent=False)
        s = cfg["seq_length"]
        self.register_buffer("mask", torch.triu(torch.ones(s, s, dtype=torch.bool), 1), persistent=False)

    def forward(self, tokens, labels):
        # tokens, labels: (b, s) -> mean cross-entropy over the padded vocabulary
        x = self.wte(tokens) + self.wpe(self.positions)
        for blk in self.blocks:
            x = blk(x, self.mask)
        logits = torch.matmul(self.lnf(x), self.wte.weight.t())  # (b, s, v_padded)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.reshape(-1))


def make_optimizer(model, lr, weight_decay, foreach, beta2=0.95):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr, betas=(0.9, beta2), eps=1e-8, foreach=foreach)


def loaded_blas(threads):
    """Path of the libblas torch loaded; for OpenBLAS also sets its thread count."""
    with open("/proc/self/maps") as fh:
        paths = {line.split()[-1] for line in fh if "libblas" in line or "openblas" in line}
    blas = sorted(p for p in paths if "libblas" in os.path.basename(p))
    path = blas[0] if blas else "unknown"
    if path != "unknown":
        lib = ctypes.CDLL(path)
        if hasattr(lib, "openblas_set_num_threads"):
            lib.openblas_set_num_threads(threads)
            core = getattr(lib, "openblas_get_corename", None)
            if core is not None:
                core.restype = ctypes.c_char_p
                path += " (OpenBLAS %s)" % core().decode()
    return path


def model_flops_per_iter(cfg):
    """Megatron's count of matmul FLOPs for forward + backward (no recompute)."""
    b, s, L, h = cfg["micro_batch_size"], cfg["seq_length"], cfg["num_layers"], cfg["hidden_size"]
    f, v = cfg["ffn_hidden_size"], cfg["padded_vocab_size"]
    per_layer = 2 * b * s * (3 * h * h + h * h + 2 * h * f) + 2 * 2 * b * s * s * h
    return 3 * (L * per_layer + 2 * b * s * h * v)


def main():
    ap = argparse.ArgumentParser(description="PyTorch eager GPT training baseline (one JSON line)")
    ap.add_argument("--num-layers", type=int, default=4)
    ap.add_argument("--hidden-size", type=int, default=128)
    ap.add_argument("--num-attention-heads", type=int, default=4)
    ap.add_argument("--ffn-hidden-size", type=int, default=None, help="default 4 * hidden")
    ap.add_argument("--seq-length", type=int, default=64)
    ap.add_argument("--micro-batch-size", type=int, default=12)
    ap.add_argument("--vocab-size", type=int, default=65)
    ap.add_argument("--make-vocab-size-divisible-by", type=int, default=128)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op (OpenMP) threads")
    ap.add_argument("--blas-threads", type=int, default=None,
                    help="OpenBLAS threads (default: --threads)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--no-foreach", dest="foreach", action="store_false",
                    help="use the per-tensor AdamW loop instead of the multi-tensor one")
    args = ap.parse_args()
    if args.hidden_size % args.num_attention_heads:
        ap.error(f"--hidden-size {args.hidden_size} is not divisible by --num-attention-heads "
                 f"{args.num_attention_heads}; fix: pick heads dividing hidden")

    torch.set_num_threads(args.threads)
    blas_threads = args.blas_threads or args.threads
    blas = loaded_blas(blas_threads)
    torch.manual_seed(args.seed)
    div = args.make_vocab_size_divisible_by
    cfg = {
        "num_layers": args.num_layers,
        "hidden_size": args.hidden_size,
        "num_attention_heads": args.num_attention_heads,
        "ffn_hidden_size": args.ffn_hidden_size or 4 * args.hidden_size,
        "seq_length": args.seq_length,
        "micro_batch_size": args.micro_batch_size,
        "vocab_size": args.vocab_size,
        "padded_vocab_size": (args.vocab_size + div - 1) // div * div,
    }
    model = Gpt(cfg)
    opt = make_optimizer(model, args.lr, 0.1, args.foreach)
    b, s = cfg["micro_batch_size"], cfg["seq_length"]
    gen = torch.Generator().manual_seed(args.seed)

    def step():
        stream = torch.randint(0, cfg["vocab_size"], (b, s + 1), generator=gen)
        loss = model(stream[:, :s], stream[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    for _ in range(args.warmup):
        step()
    times = []
    loss = float("nan")
    for _ in range(args.iters):
        t0 = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t0)
    total = sum(times)
    flops = model_flops_per_iter(cfg)
    print(json.dumps({
        "impl": "pytorch",
        "threads": args.threads,
        "blas_threads": blas_threads,
        "tokens_per_s": round(b * s * args.iters / total, 1),
        "ms_per_iter": round(1e3 * total / args.iters, 3),
        "ms_per_iter_median": round(1e3 * statistics.median(times), 3),
        "gflops_per_s": round(flops * args.iters / total / 1e9, 2),
        **cfg,
        "iters": args.iters,
        "warmup": args.warmup,
        "last_loss": round(loss, 4),
        "torch": torch.__version__,
        "foreach": args.foreach,
        "blas": blas,
        "host": platform.node(),
        "loadavg_1m_at_end": float(open("/proc/loadavg").read().split()[0]),
    }))


if __name__ == "__main__":
    main()
