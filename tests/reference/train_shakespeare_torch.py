#!/usr/bin/python3
"""PyTorch eager training of benchmark config (a) on Tiny Shakespeare (char-level).

Gives the validation loss the C++ trainer should reach with the same recipe:
GPT-2 (4 layers, 4 heads, hidden 128, ffn 512, seq 64, micro-batch 12, 65
characters padded to 128, tied embeddings, no dropout) — the model of
bench/pytorch_gpt.py — trained with AdamW (betas 0.9/0.99, eps 1e-8, weight
decay 0.1 on 2-D weights and embeddings), global-norm clipping 1.0, and
Megatron's learning-rate schedule: linear warm-up from 0 over 100 iterations,
then cosine decay from 1e-3 to 1e-4 at iteration 2000.

Data: the characters of the file, sorted, are the vocabulary (65 for Tiny
Shakespeare); the first 90% of the characters train, the last 10% validate
(nanoGPT's split). Training windows are drawn at uniformly random offsets.
The validation loss is the mean over every token of all non-overlapping
windows of the validation split (deterministic, the whole split).

Run (about 2 minutes with OpenBLAS on one core; see bench/pytorch_gpt.py for
why LD_LIBRARY_PATH):
  OMP_WAIT_POLICY=passive LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread \
      /usr/bin/python3 tests/reference/train_shakespeare_torch.py
"""

import argparse
import json
import math
import os
import sys
import time

import torch

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO_ROOT, "bench"))
from pytorch_gpt import Gpt, loaded_blas, make_optimizer  # noqa: E402  (same model as the benchmark)


def megatron_lr(it, max_lr, min_lr, warmup, decay_iters):
    """Megatron's OptimizerParamScheduler (cosine), it = number of steps taken so far."""
    if warmup > 0 and it <= warmup:
        return max_lr * it / warmup
    if it > decay_iters:
        return min_lr
    ratio = (it - warmup) / (decay_iters - warmup)
    return min_lr + 0.5 * (math.cos(math.pi * ratio) + 1.0) * (max_lr - min_lr)


@torch.no_grad()
def evaluate(model, val, s, b):
    """Mean cross-entropy over all non-overlapping windows of the validation split."""
    model.eval()
    n_windows = (val.numel() - 1) // s
    starts = torch.arange(n_windows) * s
    total, count = 0.0, 0
    for i in range(0, n_windows, b):
        idx = starts[i:i + b]
        x = torch.stack([val[j:j + s] for j in idx.tolist()])
        y = torch.stack([val[j + 1:j + 1 + s] for j in idx.tolist()])
        total += model(x, y).item() * x.numel()
        count += x.numel()
    model.train()
    return total / count


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(REPO_ROOT, "..", "shared", "data", "tinyshakespeare.txt"))
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--eval-interval", type=int, default=500)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    if not os.path.exists(args.data):
        sys.exit(f"data file {args.data} not found; fix: pass --data path/to/tinyshakespeare.txt")

    torch.set_num_threads(args.threads)
    blas = loaded_blas(args.threads)  # also sets OpenBLAS's thread count
    torch.manual_seed(args.seed)
    text = open(args.data, encoding="utf-8").read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n_train = int(0.9 * len(data))
    train, val = data[:n_train], data[n_train:]

    cfg = {"num_layers": 4, "hidden_size": 128, "num_attention_heads": 4, "ffn_hidden_size": 512,
           "seq_length": 64, "micro_batch_size": 12, "vocab_size": len(chars),
           "padded_vocab_size": (len(chars) + 127) // 128 * 128}
    model = Gpt(cfg)
    opt = make_optimizer(model, args.lr, 0.1, foreach=True, beta2=0.99)
    s, b = cfg["seq_length"], cfg["micro_batch_size"]
    gen = torch.Generator().manual_seed(args.seed)
    print(f"vocab {len(chars)} (padded {cfg['padded_vocab_size']}), train {len(train)} chars, "
          f"val {len(val)} chars, {sum(p.numel() for p in model.parameters())} parameters", flush=True)

    t0 = time.perf_counter()
    val_loss = float("nan")
    for it in range(args.iters):
        lr = megatron_lr(it, args.lr, args.min_lr, args.warmup, args.iters)
        for group in opt.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, len(train) - s - 1, (b,), generator=gen).tolist()
        x = torch.stack([train[j:j + s] for j in starts])
        y = torch.stack([train[j + 1:j + 1 + s] for j in starts])
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if it % 100 == 0 or it == args.iters - 1:
            print(f"iter {it:5d}  loss {loss.item():.4f}  grad_norm {norm.item():.3f}  lr {lr:.2e}  "
                  f"{time.perf_counter() - t0:.0f}s", flush=True)
        if (it + 1) % args.eval_interval == 0 or it == args.iters - 1:
            val_loss = evaluate(model, val, s, b)
            print(f"iter {it + 1:5d}  val_loss {val_loss:.4f}", flush=True)
    print(json.dumps({"impl": "pytorch", "task": "tinyshakespeare_char", "iters": args.iters,
                      "final_val_loss": round(val_loss, 4), "seconds": round(time.perf_counter() - t0, 1),
                      "threads": args.threads, "blas": blas, **cfg}))


if __name__ == "__main__":
    main()
