#!/usr/bin/python3
"""Golden reference for the C++ Llama-style model: writes tests/fixtures/llama_tiny.safetensors.

A tiny Megatron-core GPT model configured as Llama (2 layers, hidden 32, 4 query
heads in 2 query groups, RMSNorm, RoPE, SwiGLU, no biases, untied output layer)
is initialised from a fixed torch seed, run forward and backward in float64 on
one fixed batch, and then trained for 5 AdamW steps on that same batch. The
stored tensors mirror gpt2_reference.py's fixture (float32; tokens/labels int32).

Conventions (the contract with the C++ test; see README.md):
  * parameter names and layouts are Megatron-core's; torch layout (out, in);
  * QKV rows are Megatron core's fused layout per query group: for group g the
    q rows of its hpg = heads / groups heads, then its k rows, then its v rows:
    row = g*(hpg+2)*d + j*d + e, j < hpg is query head g*hpg + j, j = hpg is k,
    j = hpg + 1 is v; query head n uses the k/v of group n // hpg;
  * RoPE on q and k after the projection, rotate-half (non-interleaved):
    y[:d/2] = x1 cos - x2 sin, y[d/2:] = x2 cos + x1 sin; the cos/sin table is
    built as the C++ builds it (rope_tables below);
  * fc1 rows are [gate (ffn); up (ffn)]; act = silu(gate) * up;
  * tokens/labels are (b, s); logits are stored sequence-first (s, b, v_padded);
  * loss is the mean cross-entropy over all b*s tokens over the padded vocab.

The float64 forward is written with explicit tensor operations. --verify
(default on) checks it against an independent float32 model written the way
Hugging Face writes Llama (batch-first, separate q/k/v/gate/up nn.Linear
layers, k/v expanded with repeat_interleave, RoPE as a complex multiplication,
F.silu, F.softmax, F.cross_entropy), checks gradient entries against central
finite differences and replays the 5 training steps in float32.

The generic parts (init, batch, AdamW replay, finite differences, safetensors
writer and reader) are imported from gpt2_reference.py.

Run: /usr/bin/python3 tests/reference/llama_reference.py [--output PATH]
"""

import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_reference as ref  # noqa: E402

CONFIG = {
    "num_layers": 2,
    "hidden_size": 32,
    "num_attention_heads": 4,
    "num_query_groups": 2,
    "kv_channels": 8,
    "ffn_hidden_size": 48,
    "seq_length": 16,
    "max_position_embeddings": 32,
    "vocab_size": 65,
    "padded_vocab_size": 128,
    "micro_batch_size": 3,
    "normalization": "RMSNorm",
    "layernorm_epsilon": 1e-5,  # --norm-epsilon
    "position_embedding_type": "rope",
    "rotary_base": 10000,
    "rotary_percent": 1.0,
    "swiglu": True,
    "group_query_attention": True,
    "disable_bias_linear": True,
    "untie_embeddings_and_output_weights": True,
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

DEFAULT_OUTPUT = os.path.join(ref.REPO_ROOT, "tests", "fixtures", "llama_tiny.safetensors")


def param_shapes(cfg):
    """Ordered list of (Megatron-core name, global shape)."""
    h, f, v = cfg["hidden_size"], cfg["ffn_hidden_size"], cfg["padded_vocab_size"]
    d, a, g = cfg["kv_channels"], cfg["num_attention_heads"], cfg["num_query_groups"]
    shapes = [("embedding.word_embeddings.weight", (v, h))]
    for i in range(cfg["num_layers"]):
        p = f"decoder.layers.{i}."
        shapes += [
            (p + "input_layernorm.weight", (h,)),
            (p + "self_attention.linear_qkv.weight", ((a + 2 * g) * d, h)),
            (p + "self_attention.linear_proj.weight", (h, a * d)),
            (p + "pre_mlp_layernorm.weight", (h,)),
            (p + "mlp.linear_fc1.weight", (2 * f, h)),
            (p + "mlp.linear_fc2.weight", (h, f)),
        ]
    shapes += [("decoder.final_layernorm.weight", (h,)), ("output_layer.weight", (v, h))]
    return shapes


# ----------------------------------------------------------------------------
# Float64 reference forward (explicit operations)


def rope_tables(cfg, s):
    """cos, sin: (s, d/2) float64 holding float32 values, built as the C++
    make_rope_table builds them: inv_freq[i] = 1 / base^(2i/d) and
    angle = float(t) * inv_freq[i] in float32 (torch float32 ops, as Megatron's
    RotaryEmbedding), then cos/sin of that float32 angle in float64, rounded to float32."""
    d = cfg["kv_channels"]
    assert cfg["rotary_percent"] == 1.0, "this reference rotates the whole head"
    inv_freq = 1.0 / (cfg["rotary_base"] ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    # For d = 8, base = 1e4 the powers are exactly 1, 10, 100, 1000, so inv_freq is
    # the float32 rounding of 1, 0.1, 0.01, 0.001 whatever pow implementation is used.
    assert torch.equal(inv_freq, torch.tensor([1.0, 0.1, 0.01, 0.001], dtype=torch.float64).float())
    angle = torch.arange(s, dtype=torch.float32).unsqueeze(1) * inv_freq.unsqueeze(0)  # (s, d/2) float32
    cos = angle.double().cos().float().double()
    sin = angle.double().sin().float().double()
    return cos, sin


def rms_norm(x, w, eps):
    # x: (..., h)
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * w


def rope(x, cos, sin):
    # x: (..., s, d); cos, sin: (s, d/2); rotate-half
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def gqa_causal_attention(qkv, heads, groups, cos, sin):
    # qkv: (s, b, (heads + 2 groups) d) in Megatron's per-group layout -> ctx: (s, b, heads d)
    s, b, rows = qkv.shape
    hpg = heads // groups
    d = rows // (heads + 2 * groups)
    qkv = qkv.view(s, b, groups, hpg + 2, d).permute(1, 2, 3, 0, 4)  # (b, G, hpg+2, s, d)
    q = rope(qkv[:, :, :hpg], cos, sin)  # (b, G, hpg, s, d)
    k = rope(qkv[:, :, hpg:hpg + 1], cos, sin)  # (b, G, 1, s, d): shared by the group's heads
    v = qkv[:, :, hpg + 1:]  # (b, G, 1, s, d)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)  # (b, G, hpg, s, s)
    future = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
    probs = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    ctx = probs @ v  # (b, G, hpg, s, d); head n = g*hpg + j
    return ctx.permute(3, 0, 1, 2, 4).reshape(s, b, heads * d)


def forward(params, tokens, labels, cfg):
    """Returns logits (s, b, v_padded) and the mean cross-entropy loss (scalar)."""
    eps, f = cfg["layernorm_epsilon"], cfg["ffn_hidden_size"]
    b, s = tokens.shape
    dtype = params["embedding.word_embeddings.weight"].dtype
    cos, sin = (t.to(dtype) for t in rope_tables(cfg, s))
    x = params["embedding.word_embeddings.weight"][tokens.t()]  # (s, b, h)
    for i in range(cfg["num_layers"]):
        P = lambda n: params[f"decoder.layers.{i}." + n]  # noqa: E731
        qkv = rms_norm(x, P("input_layernorm.weight"), eps) @ P("self_attention.linear_qkv.weight").t()
        ctx = gqa_causal_attention(qkv, cfg["num_attention_heads"], cfg["num_query_groups"], cos, sin)
        x = x + ctx @ P("self_attention.linear_proj.weight").t()
        fc1 = rms_norm(x, P("pre_mlp_layernorm.weight"), eps) @ P("mlp.linear_fc1.weight").t()  # (s, b, 2f)
        gate, up = fc1[..., :f], fc1[..., f:]
        x = x + (gate / (1.0 + torch.exp(-gate)) * up) @ P("mlp.linear_fc2.weight").t()
    y = rms_norm(x, params["decoder.final_layernorm.weight"], eps)
    logits = y @ params["output_layer.weight"].t()  # (s, b, v_padded)
    flat = logits.reshape(s * b, -1)
    target = labels.t().reshape(s * b)
    lse = torch.logsumexp(flat, dim=-1)
    loss = (lse - flat.gather(1, target.unsqueeze(1)).squeeze(1)).mean()
    return logits, loss


# ----------------------------------------------------------------------------
# Independent float32 check, written as Hugging Face writes Llama


class RmsNorm(torch.nn.Module):
    def __init__(self, h, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class NnLlama(torch.nn.Module):
    """Batch-first; separate q/k/v and gate/up projections (de-interleaved on load);
    RoPE as multiplication of (x[i] + i x[i + d/2]) by exp(i angle), with angles
    from float64 base^(-2i/d); k/v repeated per query head."""

    def __init__(self, cfg):
        super().__init__()
        h, f, v = cfg["hidden_size"], cfg["ffn_hidden_size"], cfg["padded_vocab_size"]
        a, g, d = cfg["num_attention_heads"], cfg["num_query_groups"], cfg["kv_channels"]
        eps = cfg["layernorm_epsilon"]
        self.cfg = cfg
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False)  # noqa: E731
        self.embed_tokens = torch.nn.Embedding(v, h)
        self.layers = torch.nn.ModuleList()
        for _ in range(cfg["num_layers"]):
            blk = torch.nn.Module()
            blk.input_norm, blk.post_attention_norm = RmsNorm(h, eps), RmsNorm(h, eps)
            blk.q_proj, blk.k_proj, blk.v_proj, blk.o_proj = lin(h, a * d), lin(h, g * d), lin(h, g * d), lin(a * d, h)
            blk.gate_proj, blk.up_proj, blk.down_proj = lin(h, f), lin(h, f), lin(f, h)
            self.layers.append(blk)
        self.norm = RmsNorm(h, eps)
        self.lm_head = lin(h, v)

    @torch.no_grad()
    def load_megatron(self, params):
        c = self.cfg
        h, f, g, d = c["hidden_size"], c["ffn_hidden_size"], c["num_query_groups"], c["kv_channels"]
        hpg = c["num_attention_heads"] // g
        p32 = {k: t.to(torch.float32) for k, t in params.items()}
        self.embed_tokens.weight.copy_(p32["embedding.word_embeddings.weight"])
        for i, blk in enumerate(self.layers):
            p = f"decoder.layers.{i}."
            w = p32[p + "self_attention.linear_qkv.weight"].view(g, hpg + 2, d, h)
            blk.q_proj.weight.copy_(w[:, :hpg].reshape(-1, h))
            blk.k_proj.weight.copy_(w[:, hpg].reshape(-1, h))
            blk.v_proj.weight.copy_(w[:, hpg + 1].reshape(-1, h))
            blk.o_proj.weight.copy_(p32[p + "self_attention.linear_proj.weight"])
            blk.input_norm.weight.copy_(p32[p + "input_layernorm.weight"])
            blk.post_attention_norm.weight.copy_(p32[p + "pre_mlp_layernorm.weight"])
            blk.gate_proj.weight.copy_(p32[p + "mlp.linear_fc1.weight"][:f])
            blk.up_proj.weight.copy_(p32[p + "mlp.linear_fc1.weight"][f:])
            blk.down_proj.weight.copy_(p32[p + "mlp.linear_fc2.weight"])
        self.norm.weight.copy_(p32["decoder.final_layernorm.weight"])
        self.lm_head.weight.copy_(p32["output_layer.weight"])

    def forward(self, tokens, labels):
        c = self.cfg
        b, s = tokens.shape
        a, g, d = c["num_attention_heads"], c["num_query_groups"], c["kv_channels"]
        theta = c["rotary_base"] ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        rot = torch.polar(torch.ones(s, d // 2, dtype=torch.float64),
                          torch.outer(torch.arange(s, dtype=torch.float64), theta)).to(torch.complex64)

        def apply_rope(t):  # (b, heads, s, d)
            z = torch.complex(t[..., : d // 2], t[..., d // 2:]) * rot
            return torch.cat([z.real, z.imag], dim=-1)

        mask = torch.full((s, s), float("-inf")).triu(1)
        x = self.embed_tokens(tokens)  # (b, s, h)
        for blk in self.layers:
            n = blk.input_norm(x)
            q = apply_rope(blk.q_proj(n).view(b, s, a, d).transpose(1, 2))
            k = apply_rope(blk.k_proj(n).view(b, s, g, d).transpose(1, 2)).repeat_interleave(a // g, dim=1)
            v = blk.v_proj(n).view(b, s, g, d).transpose(1, 2).repeat_interleave(a // g, dim=1)
            probs = F.softmax(torch.matmul(q, k.transpose(2, 3)) * d ** -0.5 + mask, dim=-1)
            x = x + blk.o_proj(torch.matmul(probs, v).transpose(1, 2).reshape(b, s, a * d))
            n = blk.post_attention_norm(x)
            x = x + blk.down_proj(F.silu(blk.gate_proj(n)) * blk.up_proj(n))
        logits = self.lm_head(self.norm(x))  # (b, s, v)
        loss = F.cross_entropy(logits.reshape(b * s, -1), labels.reshape(b * s))
        return logits.transpose(0, 1), loss


def verify(params, tokens, labels, logits64, loss64, cfg):
    model = NnLlama(cfg)
    model.load_megatron(params)
    logits32, loss32 = model(tokens, labels)
    err = (logits32.double() - logits64).abs().max().item()
    lerr = abs(loss32.item() - loss64.item())
    print(f"verify: HF-style float32 model vs float64 reference: max |dlogits| = {err:.3e}, |dloss| = {lerr:.3e}")
    ok = err < 1e-5 and lerr < 1e-5

    # Random entries of several parameters, plus one entry in a k row and one in
    # a v row of each group of layer 0's linear_qkv (row g*(hpg+2)*d + j*d + e).
    h, d = cfg["hidden_size"], cfg["kv_channels"]
    hpg = cfg["num_attention_heads"] // cfg["num_query_groups"]
    qkv0 = "decoder.layers.0.self_attention.linear_qkv.weight"
    kv_rows = [g * (hpg + 2) * d + j * d + 3 for g in range(cfg["num_query_groups"]) for j in (hpg, hpg + 1)]
    worst = ref.finite_difference_check(
        forward, params, tokens, labels, cfg,
        ["embedding.word_embeddings.weight", qkv0, "decoder.layers.1.self_attention.linear_qkv.weight",
         "decoder.layers.0.input_layernorm.weight", "decoder.layers.1.mlp.linear_fc1.weight",
         "decoder.layers.0.mlp.linear_fc2.weight", "decoder.final_layernorm.weight", "output_layer.weight"]
        + [(qkv0, r * h + 5) for r in kv_rows])
    print(f"verify: finite-difference gradient check (28 entries), worst |fd - analytic| / "
          f"(1e-7 + 1e-5 |analytic|) = {worst:.3f} (must be < 1)")
    return ok and worst < 1.0


# ----------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--output", default=DEFAULT_OUTPUT, help="fixture path (default: %(default)s)")
    ap.add_argument("--no-verify", dest="verify", action="store_false",
                    help="skip the self-checks (HF-style float32 forward, finite differences, float32 replay)")
    args = ap.parse_args()

    torch.set_num_threads(1)  # bit-for-bit reproducible reductions
    torch.manual_seed(CONFIG["seed"])
    cfg = CONFIG
    shapes = param_shapes(cfg)
    gen = torch.Generator().manual_seed(cfg["seed"])
    params = ref.init_params(cfg, gen, shapes)
    tokens, labels = ref.make_batch(cfg, gen)

    with torch.no_grad():
        logits, loss = forward(params, tokens, labels, cfg)

    if args.verify and not verify(params, tokens, labels, logits, loss, cfg):
        sys.exit("verify: FAILED — the float64 reference and the HF-style model disagree")

    step_losses, grad_norms, first_grads, finals = ref.train(params, tokens, labels, cfg, log=True,
                                                             forward_fn=forward)
    assert step_losses[0] == loss.item(), (step_losses[0], loss.item())

    if args.verify and not ref.verify_fp32_training(params, tokens, labels, cfg, step_losses, grad_norms,
                                                    first_grads, finals, forward_fn=forward):
        sys.exit("verify: FAILED — a float32 replay of the training drifts from the float64 reference")

    f32 = lambda t: t.detach().to(torch.float32).contiguous()  # noqa: E731
    tensors = {}
    for name, _ in shapes:
        tensors[name] = f32(params[name])
    tensors["tokens"] = tokens.to(torch.int32)
    tensors["labels"] = labels.to(torch.int32)
    tensors["logits"] = f32(logits)  # (s, b, v_padded)
    tensors["loss"] = f32(loss.reshape(1))
    for name, _ in shapes:
        tensors["grad." + name] = f32(first_grads[name])
    tensors["step_losses"] = torch.tensor(step_losses, dtype=torch.float32)
    tensors["grad_norms"] = torch.tensor(grad_norms, dtype=torch.float32)
    for name, _ in shapes:
        tensors["final." + name] = f32(finals[name])

    metadata = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in cfg.items()}
    metadata.update({
        "format": "megatron.cpp llama golden fixture v1",
        "tokens_layout": "b,s",
        "logits_layout": "s,b,padded_vocab",
        "qkv_layout": "per query group g: q of its hpg heads, then k, then v: "
                      "row = g*(hpg+2)*d + j*d + e (j<hpg: q head g*hpg+j; j=hpg: k; j=hpg+1: v)",
        "fc1_layout": "rows [0, ffn) gate, [ffn, 2 ffn) up; act = silu(gate) * up",
        "rope": "rotate-half; inv_freq = 1/base^(2i/d) and angle = t*inv_freq in float32, "
                "cos/sin in float64 rounded to float32",
        "generator": "tests/reference/llama_reference.py (torch %s, float64)" % torch.__version__.split("+")[0],
    })
    ref.write_safetensors(args.output, tensors, metadata)

    # Read back and compare, so a writer bug cannot slip through.
    back, meta = ref.read_safetensors(args.output)
    assert list(back) == list(tensors), "read-back tensor order differs"
    for name, t in tensors.items():
        assert torch.equal(back[name], t), f"read-back mismatch for {name}"
    assert meta["num_query_groups"] == "2" and meta["swiglu"] == "true"
    gnorm = math.sqrt(sum(float((g.double() ** 2).sum()) for g in first_grads.values()))
    print(f"loss {loss.item():.10f}  (ln 128 = {math.log(128):.6f})  grad norm {gnorm:.10f}")
    print(f"wrote {args.output}: {len(tensors)} tensors, {os.path.getsize(args.output)} bytes")


if __name__ == "__main__":
    main()
