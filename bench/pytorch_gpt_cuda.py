#!/usr/bin/env python3
"""PyTorch GPU baseline for megatron.cpp's CUDA backend (prints one JSON line).

Same model as bench/pytorch_gpt.py (Megatron-core GPT-2 layout: learned word +
position embeddings, pre-LayerNorm blocks, fused QKV with Megatron's per-head
[q, k, v] interleave, GELU tanh MLP, final LayerNorm, output layer tied to the
word embeddings, vocab padded to a multiple of 128, no dropout; AdamW betas
0.9/0.95, weight decay 0.1 on 2-D weights and embeddings, clipping 1.0).
Defaults: GPT-2 small, seq 1024, micro-batch 8.

Attention: F.scaled_dot_product_attention(is_causal=True) (eager PyTorch as
users write it); torch without SDPA (1.13, CPU smoke runs) uses matmul +
masked softmax. --dtype bf16: torch.autocast(bfloat16), fp32 master weights;
--dtype fp32: TF32 off, real fp32. --compile: torch.compile(model) (forward +
loss), compiled during the untimed warm-up. --fused-adam: AdamW(fused=True),
else torch's default (foreach on CUDA). Four random micro-batches live on the
device, used in turn. Iteration = forward, mean cross-entropy, backward, clip,
step, zero_grad; timed by a chain of CUDA events at iteration boundaries
(device synchronized before and after), perf_counter on CPU.

  python3 bench/pytorch_gpt_cuda.py --measure-peak [--compile] [--fused-adam] [--dtype fp32]
  /usr/bin/python3 bench/pytorch_gpt_cuda.py --device cpu --dtype fp32 --num-layers 2 \\
      --hidden-size 64 --num-attention-heads 4 --seq-length 32 --micro-batch-size 2 \\
      --vocab-size 65 --iters 3 --warmup 1                          # CPU smoke test
"""

import argparse
import contextlib
import inspect
import json
import math
import statistics
import time

try:
    import torch
    import torch.nn.functional as F
    _Module = torch.nn.Module
except ImportError:  # lets --help work without torch
    torch = None
    _Module = object

HAS_SDPA = torch is not None and hasattr(F, "scaled_dot_product_attention")


class Block(_Module):
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
        # x: (b, s, h); mask: (s, s) bool, True above the diagonal (only without SDPA)
        b, s, h = x.shape
        a, d = self.heads, h // self.heads
        qkv = self.qkv(self.ln1(x)).view(b, s, a, 3, d)
        q, k, v = (qkv[:, :, :, i, :].transpose(1, 2) for i in range(3))  # (b, a, s, d)
        if mask is None:
            ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d))
            probs = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
            ctx = torch.matmul(probs, v)
        x = x + self.proj(ctx.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class Gpt(_Module):
    def __init__(self, cfg):
        super().__init__()
        h, L, s = cfg["hidden_size"], cfg["num_layers"], cfg["seq_length"]
        self.wte = torch.nn.Embedding(cfg["padded_vocab_size"], h)
        self.wpe = torch.nn.Embedding(s, h)
        self.blocks = torch.nn.ModuleList(
            Block(h, cfg["num_attention_heads"], cfg["ffn_hidden_size"], 1e-5) for _ in range(L))
        self.lnf = torch.nn.LayerNorm(h, eps=1e-5)
        std = 0.02
        for name, p in self.named_parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                torch.nn.init.zeros_(p)
        for blk in self.blocks:  # Megatron scales the output projections' init by 1/sqrt(2L)
            torch.nn.init.normal_(blk.proj.weight, 0.0, std / math.sqrt(2 * L))
            torch.nn.init.normal_(blk.fc2.weight, 0.0, std / math.sqrt(2 * L))
        self.register_buffer("positions", torch.arange(s), persistent=False)
        if HAS_SDPA:
            self.mask = None
        else:  # True above the diagonal (the future)
            self.register_buffer("mask", torch.triu(torch.ones(s, s, dtype=torch.bool), 1),
                                 persistent=False)

    def forward(self, tokens, labels):
        # tokens, labels: (b, s) -> mean cross-entropy over the padded vocabulary
        x = self.wte(tokens) + self.wpe(self.positions)
        for blk in self.blocks:
            x = blk(x, self.mask)
        logits = torch.matmul(self.lnf(x), self.wte.weight.t())  # (b, s, v_padded)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.reshape(-1))


def flops_per_iter(cfg, causal_half=True):
    """Model FLOPs of one iteration (forward + backward = 3x forward, no recompute). Per token:
      6 * (non-embedding matmul weights L*(4h^2 + 2hf) + output layer h*v_padded) + 6 * L * s * h
    (the last term: QK^T and PV, causal = half of s*s). That is Megatron-LM's
    num_floating_point_operations and megatron.cpp's flops_per_iteration (src/observe/metrics.cc)
    exactly, so MFUs compare; biases and LayerNorms are not counted (<0.2% at GPT-2 small).
    causal_half=False: 12 * L * s * h, full s*s (PaLM / llm.c; bench/pytorch_gpt.py)."""
    b, s, L, h = cfg["micro_batch_size"], cfg["seq_length"], cfg["num_layers"], cfg["hidden_size"]
    f, v = cfg["ffn_hidden_size"], cfg["padded_vocab_size"]
    per_token = 6 * (L * (4 * h * h + 2 * h * f) + h * v) + (6 if causal_half else 12) * L * s * h
    return per_token * b * s


class Clock:
    """Timestamps on the device's stream (CUDA events) or the host (perf_counter)."""

    def __init__(self, dev):
        self.cuda = dev.type == "cuda"

    def mark(self):
        if not self.cuda:
            return time.perf_counter()
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def sync(self):
        return torch.cuda.synchronize() if self.cuda else None

    def seconds(self, t0, t1):  # after sync()
        return t0.elapsed_time(t1) / 1e3 if self.cuda else t1 - t0


def measure_peak(n, dtype, dev, clock):
    """Best FLOP/s of an n x n x n torch.matmul: 3 warm-ups, 10 timed runs, random data."""
    g = torch.Generator(device=dev).manual_seed(0)
    a = torch.randn(n, n, device=dev, dtype=dtype, generator=g)
    b = torch.randn(n, n, device=dev, dtype=dtype, generator=g)
    for _ in range(3):
        torch.matmul(a, b)
    clock.sync()
    best = 0.0
    for _ in range(10):
        t0 = clock.mark()
        torch.matmul(a, b)
        t1 = clock.mark()
        clock.sync()
        best = max(best, 2.0 * n ** 3 / clock.seconds(t0, t1))
    return best


def main():
    ap = argparse.ArgumentParser(description="PyTorch GPU GPT training baseline (one JSON line)")
    for flag, default in [("num-layers", 12), ("hidden-size", 768), ("num-attention-heads", 12),
                          ("seq-length", 1024), ("micro-batch-size", 8), ("vocab-size", 50257),
                          ("make-vocab-size-divisible-by", 128)]:
        ap.add_argument("--" + flag, type=int, default=default, help="default %(default)s")
    ap.add_argument("--ffn-hidden-size", type=int, default=None, help="default 4 * hidden")
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16",
                    help="bf16: autocast with fp32 master weights; fp32: TF32 off")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--fused-adam", action="store_true", help="AdamW(fused=True)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed iterations (compile included)")
    ap.add_argument("--iters", type=int, default=20, help="timed iterations")
    ap.add_argument("--measure-peak", action="store_true",
                    help="measure the MFU denominator: best size^3 matmul TFLOP/s in --dtype")
    ap.add_argument("--peak-size", type=int, default=8192, help="matmul size for --measure-peak")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    if torch is None:
        ap.error("torch is not importable; fix: run with a Python that has PyTorch")
    if args.hidden_size % args.num_attention_heads:
        ap.error("--hidden-size must be divisible by --num-attention-heads")
    if args.iters < 1 or args.warmup < 0:
        ap.error("--iters must be >= 1 and --warmup >= 0")
    if args.compile and not hasattr(torch, "compile"):
        ap.error("--compile needs torch >= 2.0 (this is %s)" % torch.__version__)
    if args.fused_adam and "fused" not in inspect.signature(torch.optim.AdamW).parameters:
        ap.error("--fused-adam needs a torch whose AdamW has fused= (this is %s)" % torch.__version__)
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        ap.error("CUDA is not available; fix: run on a GPU or pass --device cpu")
    if dev.type == "cuda" and dev.index is not None:
        torch.cuda.set_device(dev)
    if args.dtype == "fp32":  # real fp32, not TF32 (legacy flags only: never mix in the new API)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    torch.manual_seed(args.seed)
    div = args.make_vocab_size_divisible_by
    cfg = {k: getattr(args, k) for k in ("num_layers", "hidden_size", "num_attention_heads")}
    cfg["ffn_hidden_size"] = args.ffn_hidden_size or 4 * args.hidden_size
    cfg.update(seq_length=args.seq_length, micro_batch_size=args.micro_batch_size,
               vocab_size=args.vocab_size, padded_vocab_size=-(-args.vocab_size // div) * div)
    b, s = cfg["micro_batch_size"], cfg["seq_length"]
    model = Gpt(cfg).to(dev)  # fp32 master weights in both modes
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    extra = {"fused": True} if args.fused_adam else {}
    opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8, **extra)
    fwd = torch.compile(model) if args.compile else model

    gen = torch.Generator(device=dev).manual_seed(args.seed)
    batches = []
    for _ in range(4):
        stream = torch.randint(0, cfg["vocab_size"], (b, s + 1), device=dev, generator=gen)
        batches.append((stream[:, :s].contiguous(), stream[:, 1:].contiguous()))

    def autocast():  # bf16: standard mixed precision (fp32 master weights, autocast forward)
        bf16 = args.dtype == "bf16"
        return torch.autocast(dev.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()

    def step(i):
        tokens, labels = batches[i % len(batches)]
        with autocast():
            loss = fwd(tokens, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    clock = Clock(dev)
    t_warm = time.perf_counter()
    for i in range(args.warmup):
        step(i)
    clock.sync()
    warmup_s = time.perf_counter() - t_warm
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)

    marks = [clock.mark()]
    wall0 = time.perf_counter()
    for i in range(args.iters):
        loss = step(args.warmup + i)
        marks.append(clock.mark())
    clock.sync()
    wall_s = time.perf_counter() - wall0
    times = [clock.seconds(marks[i], marks[i + 1]) for i in range(args.iters)]
    mean_s = clock.seconds(marks[0], marks[-1]) / args.iters
    median_s = statistics.median(times)

    flops = flops_per_iter(cfg)
    achieved = flops / mean_s / 1e12
    peak = None
    if args.measure_peak:
        pdt = torch.bfloat16 if args.dtype == "bf16" else torch.float32
        peak = measure_peak(args.peak_size, pdt, dev, clock) / 1e12
    print(json.dumps({
        "impl": "pytorch-compile" if args.compile else "pytorch-eager",
        "device": str(dev),
        "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "dtype": args.dtype,
        "tokens_per_s": round(b * s / mean_s, 1),
        "ms_per_iter_median": round(1e3 * median_s, 3),
        "ms_per_iter_mean": round(1e3 * mean_s, 3),
        "flops_per_iter": flops,
        "flops_per_iter_full_attention": flops_per_iter(cfg, causal_half=False),
        "achieved_tflops": round(achieved, 3),
        "peak_tflops": None if peak is None else round(peak, 2),
        "mfu": None if peak is None else round(achieved / peak, 4),
        **cfg,
        "iters": args.iters,
        "warmup": args.warmup,
        "warmup_s": round(warmup_s, 2),
        "wall_ms_per_iter": round(1e3 * wall_s / args.iters, 3),
        "attention": "sdpa" if HAS_SDPA else "masked-softmax",
        "optimizer": "adamw-fused" if args.fused_adam else "adamw-default",
        "max_memory_gb": (round(torch.cuda.max_memory_allocated(dev) / 1e9, 3)
                          if dev.type == "cuda" else None),
        "last_loss": round(loss.item(), 4),
    }))


if __name__ == "__main__":
    main()
