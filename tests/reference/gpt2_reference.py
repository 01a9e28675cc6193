#!/usr/bin/python3
"""Golden reference for the C++ GPT-2 model: writes tests/fixtures/gpt2_tiny.safetensors.

A tiny Megatron-style GPT-2 (2 layers, hidden 32, 4 heads) is initialised from a
fixed torch seed, run forward and backward in float64 on one fixed batch, and
then trained for 5 AdamW steps on that same batch. Everything the C++ golden
test compares is stored as float32 (tokens/labels as int32) in a safetensors
file written by hand (no safetensors package needed).

Conventions (the contract with the C++ test; see README.md):
  * parameter names and layouts are Megatron-core's; torch layout (out, in);
  * QKV rows are Megatron's per-head interleave: row = head*3*d + which*d + e,
    which 0=q 1=k 2=v, d = hidden / heads;
  * tokens/labels are (b, s); logits are stored sequence-first (s, b, v_padded);
  * loss is the mean cross-entropy over all b*s tokens over the padded vocab;
  * the output layer is tied to the word embeddings.

The float64 forward is written with explicit tensor operations (hand-written
LayerNorm, attention, GELU and cross-entropy). --verify (default on) checks it
against an independent float32 model built from torch.nn modules
(nn.LayerNorm, nn.MultiheadAttention, nn.Linear, F.gelu, F.cross_entropy) and
checks a few gradient entries against central finite differences; it also replays
the 5 training steps in float32 to show how far round-off alone moves each output.

Run: /usr/bin/python3 tests/reference/gpt2_reference.py [--output PATH]
"""

import argparse
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

CONFIG = {
    "num_layers": 2,
    "hidden_size": 32,
    "num_attention_heads": 4,
    "ffn_hidden_size": 128,
    "seq_length": 16,
    "max_position_embeddings": 32,
    "vocab_size": 65,
    "padded_vocab_size": 128,
    "micro_batch_size": 3,
    "layernorm_epsilon": 1e-5,
    "init_method_std": 0.02,
    "lr": 1e-3,
    "adam_beta1": 0.9,
    "adam_beta2": 0.95,
    "adam_eps": 1e-8,
    "weight_decay": 0.1,
    "clip_grad": 1.0,
    "hidden_dropout": 0.0,
    "attention_dropout": 0.0,
    "num_steps": 5,
    "seed": 1234,
}

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "tests", "fixtures", "gpt2_tiny.safetensors")


# ----------------------------------------------------------------------------
# Parameters


def param_shapes(cfg):
    """Ordered list of (Megatron-core name, global shape)."""
    h, f, v = cfg["hidden_size"], cfg["ffn_hidden_size"], cfg["padded_vocab_size"]
    shapes = [
        ("embedding.word_embeddings.weight", (v, h)),
        ("embedding.position_embeddings.weight", (cfg["max_position_embeddings"], h)),
    ]
    for i in range(cfg["num_layers"]):
        p = f"decoder.layers.{i}."
        shapes += [
            (p + "input_layernorm.weight", (h,)),
            (p + "input_layernorm.bias", (h,)),
            (p + "self_attention.linear_qkv.weight", (3 * h, h)),
            (p + "self_attention.linear_qkv.bias", (3 * h,)),
            (p + "self_attention.linear_proj.weight", (h, h)),
            (p + "self_attention.linear_proj.bias", (h,)),
            (p + "pre_mlp_layernorm.weight", (h,)),
            (p + "pre_mlp_layernorm.bias", (h,)),
            (p + "mlp.linear_fc1.weight", (f, h)),
            (p + "mlp.linear_fc1.bias", (f,)),
            (p + "mlp.linear_fc2.weight", (h, f)),
            (p + "mlp.linear_fc2.bias", (h,)),
        ]
    shapes += [("decoder.final_layernorm.weight", (h,)), ("decoder.final_layernorm.bias", (h,))]
    return shapes


def init_params(cfg, gen, shapes=None):
    """Non-trivial random init, rounded to float32 (what the fixture stores), held in float64.

    Matrices and embeddings ~ N(0, std); LayerNorm weights 1 + 0.1 N(0,1);
    biases (including LayerNorm biases) 0.02 N(0,1). `shapes` (default this
    model's param_shapes) is the ordered (name, shape) list; draws follow its order.
    """
    params = {}
    for name, shape in (param_shapes(cfg) if shapes is None else shapes):
        z = torch.randn(shape, generator=gen, dtype=torch.float64)
        if len(shape) == 2:
            t = cfg["init_method_std"] * z
        elif "layernorm.weight" in name:
            t = 1.0 + 0.1 * z
        else:
            t = 0.02 * z
        # Round through float32 so the float64 reference is exactly a function
        # of the stored float32 values.
        params[name] = t.to(torch.float32).to(torch.float64)
    return params


def make_batch(cfg, gen):
    """tokens, labels: (b, s) int64; labels are the next tokens of one random stream."""
    b, s = cfg["micro_batch_size"], cfg["seq_length"]
    stream = torch.randint(0, cfg["vocab_size"], (b, s + 1), generator=gen)
    return stream[:, :s].contiguous(), stream[:, 1:].contiguous()


# ----------------------------------------------------------------------------
# Float64 reference forward (explicit operations)


def layer_norm(x, w, b, eps):
    # x: (..., h); biased variance as in torch / Megatron
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def causal_attention(qkv, heads):
    # qkv: (s, b, 3h) in Megatron per-head interleave -> ctx: (s, b, h)
    s, b, three_h = qkv.shape
    d = three_h // (3 * heads)
    qkv = qkv.view(s, b, heads, 3, d)
    q, k, v = (qkv[:, :, :, i, :].permute(1, 2, 0, 3) for i in range(3))  # (b, a, s, d)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)  # (b, a, s, s)
    future = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(future, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    ctx = probs @ v  # (b, a, s, d)
    return ctx.permute(2, 0, 1, 3).reshape(s, b, heads * d)


def forward(params, tokens, labels, cfg):
    """Returns logits (s, b, v_padded) and the mean cross-entropy loss (scalar)."""
    eps = cfg["layernorm_epsilon"]
    b, s = tokens.shape
    wte = params["embedding.word_embeddings.weight"]
    wpe = params["embedding.position_embeddings.weight"]
    x = wte[tokens.t()] + wpe[:s].unsqueeze(1)  # (s, b, h)
    for i in range(cfg["num_layers"]):
        p = f"decoder.layers.{i}."
        h1 = layer_norm(x, params[p + "input_layernorm.weight"], params[p + "input_layernorm.bias"], eps)
        qkv = h1 @ params[p + "self_attention.linear_qkv.weight"].t() + params[p + "self_attention.linear_qkv.bias"]
        ctx = causal_attention(qkv, cfg["num_attention_heads"])
        x = x + ctx @ params[p + "self_attention.linear_proj.weight"].t() + params[p + "self_attention.linear_proj.bias"]
        h2 = layer_norm(x, params[p + "pre_mlp_layernorm.weight"], params[p + "pre_mlp_layernorm.bias"], eps)
        a = gelu_tanh(h2 @ params[p + "mlp.linear_fc1.weight"].t() + params[p + "mlp.linear_fc1.bias"])
        x = x + a @ params[p + "mlp.linear_fc2.weight"].t() + params[p + "mlp.linear_fc2.bias"]
    y = layer_norm(x, params["decoder.final_layernorm.weight"], params["decoder.final_layernorm.bias"], eps)
    logits = y @ wte.t()  # (s, b, v_padded), tied output layer
    flat = logits.reshape(s * b, -1)
    target = labels.t().reshape(s * b)
    lse = torch.logsumexp(flat, dim=-1)
    loss = (lse - flat.gather(1, target.unsqueeze(1)).squeeze(1)).mean()
    return logits, loss


# ----------------------------------------------------------------------------
# Independent float32 check built from torch.nn modules


class NnGpt(torch.nn.Module):
    """Same model from nn modules; nn.MultiheadAttention wants q/k/v as blocks,
    so the Megatron interleaved QKV rows are re-ordered on load."""

    def __init__(self, cfg):
        super().__init__()
        h, f, v = cfg["hidden_size"], cfg["ffn_hidden_size"], cfg["padded_vocab_size"]
        eps = cfg["layernorm_epsilon"]
        self.cfg = cfg
        self.wte = torch.nn.Embedding(v, h)
        self.wpe = torch.nn.Embedding(cfg["max_position_embeddings"], h)
        self.blocks = torch.nn.ModuleList()
        for _ in range(cfg["num_layers"]):
            blk = torch.nn.Module()
            blk.ln1 = torch.nn.LayerNorm(h, eps=eps)
            blk.attn = torch.nn.MultiheadAttention(h, cfg["num_attention_heads"], bias=True)
            blk.ln2 = torch.nn.LayerNorm(h, eps=eps)
            blk.fc1 = torch.nn.Linear(h, f)
            blk.fc2 = torch.nn.Linear(f, h)
            self.blocks.append(blk)
        self.lnf = torch.nn.LayerNorm(h, eps=eps)

    @torch.no_grad()
    def load_megatron(self, params):
        h, a = self.cfg["hidden_size"], self.cfg["num_attention_heads"]
        d = h // a

        def cp(dst, name):
            dst.copy_(params[name].to(torch.float32))

        cp(self.wte.weight, "embedding.word_embeddings.weight")
        cp(self.wpe.weight, "embedding.position_embeddings.weight")
        for i, blk in enumerate(self.blocks):
            p = f"decoder.layers.{i}."
            cp(blk.ln1.weight, p + "input_layernorm.weight")
            cp(blk.ln1.bias, p + "input_layernorm.bias")
            w = params[p + "self_attention.linear_qkv.weight"].view(a, 3, d, h)
            bias = params[p + "self_attention.linear_qkv.bias"].view(a, 3, d)
            blk.attn.in_proj_weight.copy_(w.transpose(0, 1).reshape(3 * h, h))
            blk.attn.in_proj_bias.copy_(bias.transpose(0, 1).reshape(3 * h))
            cp(blk.attn.out_proj.weight, p + "self_attention.linear_proj.weight")
            cp(blk.attn.out_proj.bias, p + "self_attention.linear_proj.bias")
            cp(blk.ln2.weight, p + "pre_mlp_layernorm.weight")
            cp(blk.ln2.bias, p + "pre_mlp_layernorm.bias")
            cp(blk.fc1.weight, p + "mlp.linear_fc1.weight")
            cp(blk.fc1.bias, p + "mlp.linear_fc1.bias")
            cp(blk.fc2.weight, p + "mlp.linear_fc2.weight")
            cp(blk.fc2.bias, p + "mlp.linear_fc2.bias")
        cp(self.lnf.weight, "decoder.final_layernorm.weight")
        cp(self.lnf.bias, "decoder.final_layernorm.bias")

    def forward(self, tokens, labels):
        b, s = tokens.shape
        x = self.wte(tokens.t()) + self.wpe(torch.arange(s)).unsqueeze(1)
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
        for blk in self.blocks:
            h1 = blk.ln1(x)
            x = x + blk.attn(h1, h1, h1, attn_mask=mask, need_weights=False)[0]
            x = x + blk.fc2(F.gelu(blk.fc1(blk.ln2(x)), approximate="tanh"))
        logits = self.lnf(x) @ self.wte.weight.t()
        loss = F.cross_entropy(logits.reshape(s * b, -1), labels.t().reshape(s * b))
        return logits, loss


def verify(params, tokens, labels, logits64, loss64, cfg):
    model = NnGpt(cfg)
    model.load_megatron(params)
    model.train()  # training mode: avoids MHA's inference fast path
    logits32, loss32 = model(tokens, labels)
    err = (logits32.double() - logits64).abs().max().item()
    lerr = abs(loss32.item() - loss64.item())
    print(f"verify: nn.Module float32 vs float64 reference: max |dlogits| = {err:.3e}, |dloss| = {lerr:.3e}")
    ok = err < 1e-5 and lerr < 1e-5

    worst = finite_difference_check(
        forward, params, tokens, labels, cfg,
        ["embedding.word_embeddings.weight", "decoder.layers.0.self_attention.linear_qkv.weight",
         "decoder.layers.1.mlp.linear_fc1.bias", "decoder.layers.0.input_layernorm.weight",
         "embedding.position_embeddings.weight"])
    print(f"verify: finite-difference gradient check, worst |fd - analytic| / (1e-7 + 1e-5 |analytic|)"
          f" = {worst:.3f} (must be < 1)")
    ok = ok and worst < 1.0
    return ok


def finite_difference_check(forward_fn, params, tokens, labels, cfg, names, per_name=3, seed=7):
    """Central finite differences (step 1e-6) of the float64 loss of forward_fn
    against autograd, for per_name random entries of each named parameter (an item
    (name, flat_index) checks that one entry). Returns the worst
    |fd - analytic| / (1e-7 + 1e-5 |analytic|); below 1 passes."""
    probe = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    _, loss = forward_fn(probe, tokens, labels, cfg)
    grads = dict(zip(probe, torch.autograd.grad(loss, list(probe.values()))))
    gen = torch.Generator().manual_seed(seed)
    worst = 0.0
    entries = []
    for item in names:
        if isinstance(item, tuple):
            entries.append(item)
        else:
            entries += [(item, torch.randint(0, params[item].numel(), (1,), generator=gen).item())
                        for _ in range(per_name)]
    for name, idx in entries:
        h = 1e-6
        plus = {k: v.clone() for k, v in params.items()}
        minus = {k: v.clone() for k, v in params.items()}
        plus[name].view(-1)[idx] += h
        minus[name].view(-1)[idx] -= h
        fd = (forward_fn(plus, tokens, labels, cfg)[1] - forward_fn(minus, tokens, labels, cfg)[1]).item() / (2 * h)
        an = grads[name].view(-1)[idx].item()
        # Round-off of the float64 difference quotient is ~1e-9 absolute.
        worst = max(worst, abs(fd - an) / (1e-7 + 1e-5 * abs(an)))
    return worst


# ----------------------------------------------------------------------------
# Training steps


def train(params, tokens, labels, cfg, log=False, forward_fn=None):
    """cfg["num_steps"] AdamW steps on one batch, in the dtype of params, with
    forward_fn (default: this module's forward, looked up at call time).

    Megatron's decay rule: 2-D weights and embeddings decay, biases and LayerNorm
    (1-D) parameters do not; global-norm clipping before every step.
    Returns (step_losses, pre-clip grad_norms, gradients of step 0, final params).
    """
    live = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    decay = [p for p in live.values() if p.dim() >= 2]
    no_decay = [p for p in live.values() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg["lr"], betas=(cfg["adam_beta1"], cfg["adam_beta2"]), eps=cfg["adam_eps"])
    step_losses, grad_norms, first_grads = [], [], None
    for step in range(cfg["num_steps"]):
        opt.zero_grad(set_to_none=True)
        _, l = (forward if forward_fn is None else forward_fn)(live, tokens, labels, cfg)
        l.backward()
        if first_grads is None:
            first_grads = {k: v.grad.detach().clone() for k, v in live.items()}
        norm = torch.nn.utils.clip_grad_norm_(list(live.values()), cfg["clip_grad"])
        step_losses.append(l.item())
        grad_norms.append(norm.item())
        opt.step()
        if log:
            print(f"step {step}: loss {l.item():.10f}  grad_norm (pre-clip) {norm.item():.10f}")
    finals = {k: v.detach() for k, v in live.items()}
    return step_losses, grad_norms, first_grads, finals


def verify_fp32_training(params, tokens, labels, cfg, step_losses, grad_norms, first_grads, finals,
                         forward_fn=None):
    """Replays the training in float32 (what the C++ model does) and reports how far
    round-off alone moves each output: a guide for the C++ test's tolerances."""
    p32 = {k: v.to(torch.float32) for k, v in params.items()}
    l32, n32, g32, f32_ = train(p32, tokens, labels, cfg, forward_fn=forward_fn)
    dl = max(abs(a - b) for a, b in zip(l32, step_losses))
    dn = max(abs(a - b) for a, b in zip(n32, grad_norms))
    dg = max((g32[k].double() - first_grads[k]).abs().max().item() for k in params)
    df = max((f32_[k].double() - finals[k]).abs().max().item() for k in params)
    print(f"verify: float32 replay vs float64: max |d step_loss| {dl:.2e}, |d grad_norm| {dn:.2e}, "
          f"|d grad| {dg:.2e}, |d final param| {df:.2e}")
    return dl < 1e-5 and dn < 1e-5 and dg < 1e-6 and df < 1e-5


# ----------------------------------------------------------------------------
# Safetensors writer / reader (by hand)

_DTYPES = {torch.float32: ("F32", "<f4"), torch.int32: ("I32", "<i4")}


def write_safetensors(path, tensors, metadata):
    """tensors: ordered dict name -> float32/int32 tensor; metadata: dict str -> str."""
    header = {"__metadata__": {k: str(v) for k, v in metadata.items()}}
    blobs = []
    offset = 0
    for name, t in tensors.items():
        if t.dtype not in _DTYPES:
            raise ValueError(f"{name}: dtype {t.dtype} not supported; fix: convert to float32 or int32")
        raw = raw_bytes(t)
        header[name] = {"dtype": _DTYPES[t.dtype][0], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head += b" " * ((8 - len(head) % 8) % 8)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(struct.pack("<Q", len(head)))
        fh.write(head)
        for raw in blobs:
            fh.write(raw)
    os.replace(tmp, path)


def raw_bytes(t):
    """Little-endian bytes of a contiguous tensor, without needing numpy."""
    t = t.detach().contiguous().cpu()
    fmt = "<%d%s" % (t.numel(), "f" if t.dtype == torch.float32 else "i")
    return struct.pack(fmt, *t.reshape(-1).tolist())


def read_safetensors(path):
    with open(path, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(n))
        data = fh.read()
    meta = header.pop("__metadata__", {})
    out = {}
    for name, info in header.items():
        lo, hi = info["data_offsets"]
        code = "f" if info["dtype"] == "F32" else "i"
        vals = struct.unpack("<%d%s" % ((hi - lo) // 4, code), data[lo:hi])
        dtype = torch.float32 if code == "f" else torch.int32
        out[name] = torch.tensor(vals, dtype=dtype).reshape(info["shape"])
    return out, meta


# ----------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--output", default=DEFAULT_OUTPUT, help="fixture path (default: %(default)s)")
    ap.add_argument("--no-verify", dest="verify", action="store_false",
                    help="skip the self-checks (nn.Module float32 forward, finite differences, float32 replay)")
    args = ap.parse_args()

    torch.set_num_threads(1)  # bit-for-bit reproducible reductions
    torch.manual_seed(CONFIG["seed"])
    cfg = CONFIG
    gen = torch.Generator().manual_seed(cfg["seed"])
    params = init_params(cfg, gen)
    tokens, labels = make_batch(cfg, gen)

    with torch.no_grad():
        logits, loss = forward(params, tokens, labels, cfg)

    if args.verify and not verify(params, tokens, labels, logits, loss, cfg):
        sys.exit("verify: FAILED — the float64 reference and the nn.Module model disagree")

    step_losses, grad_norms, first_grads, finals = train(params, tokens, labels, cfg, log=True)
    assert step_losses[0] == loss.item(), (step_losses[0], loss.item())

    if args.verify and not verify_fp32_training(params, tokens, labels, cfg,
                                                step_losses, grad_norms, first_grads, finals):
        sys.exit("verify: FAILED — a float32 replay of the training drifts from the float64 reference")

    f32 = lambda t: t.detach().to(torch.float32).contiguous()
    tensors = {}
    for name, _ in param_shapes(cfg):
        tensors[name] = f32(params[name])
    tensors["tokens"] = tokens.to(torch.int32)
    tensors["labels"] = labels.to(torch.int32)
    tensors["logits"] = f32(logits)  # (s, b, v_padded)
    tensors["loss"] = f32(loss.reshape(1))
    for name, _ in param_shapes(cfg):
        tensors["grad." + name] = f32(first_grads[name])
    tensors["step_losses"] = torch.tensor(step_losses, dtype=torch.float32)
    tensors["grad_norms"] = torch.tensor(grad_norms, dtype=torch.float32)
    for name, _ in param_shapes(cfg):
        tensors["final." + name] = f32(finals[name])

    metadata = dict(cfg)
    metadata.update({
        "format": "megatron.cpp gpt2 golden fixture v1",
        "tokens_layout": "b,s",
        "logits_layout": "s,b,padded_vocab",
        "qkv_layout": "row = head*3*d + which*d + e (which 0=q 1=k 2=v)",
        "generator": "tests/reference/gpt2_reference.py (torch %s, float64)" % torch.__version__.split("+")[0],
    })
    write_safetensors(args.output, tensors, metadata)

    # Read back and compare, so a writer bug cannot slip through.
    back, meta = read_safetensors(args.output)
    assert list(back) == list(tensors), "read-back tensor order differs"
    for name, t in tensors.items():
        assert torch.equal(back[name], t), f"read-back mismatch for {name}"
    assert meta["num_layers"] == "2"
    gnorm = math.sqrt(sum(float((g.double() ** 2).sum()) for g in first_grads.values()))
    print(f"loss {loss.item():.10f}  (ln 128 = {math.log(128):.6f})  grad norm {gnorm:.10f}")
    print(f"wrote {args.output}: {len(tensors)} tensors, {os.path.getsize(args.output)} bytes")


if __name__ == "__main__":
    main()
