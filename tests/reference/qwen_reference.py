#!/usr/bin/python3
"""Golden references for the attention options Qwen2/Qwen3 need: writes
tests/fixtures/qwen3_tiny.safetensors and tests/fixtures/qwen2_tiny.safetensors.

Both are llama_reference.py's tiny Megatron-core model (2 layers, hidden 32,
4 query heads in 2 query groups, RMSNorm, RoPE, SwiGLU, no linear biases,
untied output layer) with Megatron's attention options:
  * qwen3: --kv-channels 16 (head size 16, not hidden / heads = 8: linear_qkv
    is ((4 + 2*2)*16, 32) and linear_proj (32, 64)) and --qk-layernorm: an
    RMSNorm over each head's q and k (weights of 16, shared by the heads;
    decoder.layers.N.self_attention.{q,k}_layernorm.weight) after the QKV
    projection and before RoPE, as Megatron core's SelfAttention and Hugging
    Face's Qwen3Attention do;
  * qwen2: --add-qkv-bias: a bias on linear_qkv (same per-group row layout as
    its weight) with --disable-bias-linear, as Qwen2.

Same conventions and contents as llama_reference.py's fixture (float64
reference, float32 storage; logits sequence-first; gradients of step 0; five
AdamW steps). --verify (default on) checks the float64 forward against an
independent float32 model written as Hugging Face writes Qwen2/Qwen3
(separate q/k/v projections with their biases, q_norm/k_norm on the
(b, s, heads, d) view before the transpose, RoPE as a complex product,
repeat_interleave for the groups), checks gradient entries (the q/k norm
weights and the QKV bias included) against central finite differences, and
replays the training in float32.

Run: /usr/bin/python3 tests/reference/qwen_reference.py [--only qwen3|qwen2]
"""

import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_reference as ref  # noqa: E402
import llama_reference as llama  # noqa: E402

CONFIGS = {
    "qwen3": dict(llama.CONFIG, kv_channels=16, qk_layernorm=True, add_qkv_bias=False),
    "qwen2": dict(llama.CONFIG, kv_channels=8, qk_layernorm=False, add_qkv_bias=True),
}


def param_shapes(cfg):
    """llama's list with the QKV bias after the QKV weight and the q/k norms
    after it (Megatron.cpp's registration order)."""
    d = cfg["kv_channels"]
    qkv_rows = (cfg["num_attention_heads"] + 2 * cfg["num_query_groups"]) * d
    out = []
    for name, shape in llama.param_shapes(cfg):
        out.append((name, shape))
        if name.endswith("self_attention.linear_qkv.weight"):
            p = name[: -len("linear_qkv.weight")]
            if cfg["add_qkv_bias"]:
                out.append((p + "linear_qkv.bias", (qkv_rows,)))
            if cfg["qk_layernorm"]:
                out += [(p + "q_layernorm.weight", (d,)), (p + "k_layernorm.weight", (d,))]
    return out


def rope_tables(cfg, s):
    """cos, sin: (s, d/2) as the C++ make_rope_table builds them (float32
    inv_freq = 1 / base^(2i/d) and angle, cos/sin in float64 rounded to float32)."""
    d = cfg["kv_channels"]
    inv_freq = 1.0 / (cfg["rotary_base"] ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    angle = torch.arange(s, dtype=torch.float32).unsqueeze(1) * inv_freq.unsqueeze(0)
    return angle.double().cos().float().double(), angle.double().sin().float().double()


def attention(qkv, P, cfg, cos, sin):
    # qkv: (s, b, (a + 2g) d) in Megatron's per-group layout -> ctx: (s, b, a d)
    s, b, _ = qkv.shape
    a, g, d, eps = cfg["num_attention_heads"], cfg["num_query_groups"], cfg["kv_channels"], cfg["layernorm_epsilon"]
    hpg = a // g
    qkv = qkv.view(s, b, g, hpg + 2, d).permute(1, 2, 3, 0, 4)  # (b, G, hpg+2, s, d)
    q, k, v = qkv[:, :, :hpg], qkv[:, :, hpg:hpg + 1], qkv[:, :, hpg + 1:]
    if cfg["qk_layernorm"]:
        q = llama.rms_norm(q, P("self_attention.q_layernorm.weight"), eps)
        k = llama.rms_norm(k, P("self_attention.k_layernorm.weight"), eps)
    q, k = llama.rope(q, cos, sin), llama.rope(k, cos, sin)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)  # (b, G, hpg, s, s)
    future = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
    ctx = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v
    return ctx.permute(3, 0, 1, 2, 4).reshape(s, b, a * d)


def forward(params, tokens, labels, cfg):
    """Returns logits (s, b, v_padded) and the mean cross-entropy loss (scalar)."""
    eps, f = cfg["layernorm_epsilon"], cfg["ffn_hidden_size"]
    b, s = tokens.shape
    dtype = params["embedding.word_embeddings.weight"].dtype
    cos, sin = (t.to(dtype) for t in rope_tables(cfg, s))
    x = params["embedding.word_embeddings.weight"][tokens.t()]  # (s, b, h)
    for i in range(cfg["num_layers"]):
        P = lambda n: params[f"decoder.layers.{i}." + n]  # noqa: E731
        qkv = llama.rms_norm(x, P("input_layernorm.weight"), eps) @ P("self_attention.linear_qkv.weight").t()
        if cfg["add_qkv_bias"]:
            qkv = qkv + P("self_attention.linear_qkv.bias")
        x = x + attention(qkv, P, cfg, cos, sin) @ P("self_attention.linear_proj.weight").t()
        fc1 = llama.rms_norm(x, P("pre_mlp_layernorm.weight"), eps) @ P("mlp.linear_fc1.weight").t()
        gate, up = fc1[..., :f], fc1[..., f:]
        x = x + (gate / (1.0 + torch.exp(-gate)) * up) @ P("mlp.linear_fc2.weight").t()
    y = llama.rms_norm(x, params["decoder.final_layernorm.weight"], eps)
    logits = y @ params["output_layer.weight"].t()
    flat = logits.reshape(s * b, -1)
    target = labels.t().reshape(s * b)
    loss = (torch.logsumexp(flat, dim=-1) - flat.gather(1, target.unsqueeze(1)).squeeze(1)).mean()
    return logits, loss


class NnQwen(torch.nn.Module):
    """Hugging Face's Qwen2/Qwen3 layout: batch-first, q/k/v projections with
    bias=attention_bias, q_norm/k_norm (RMSNorm of head_dim) on (b, s, heads, d)."""

    def __init__(self, cfg):
        super().__init__()
        h, f, v = cfg["hidden_size"], cfg["ffn_hidden_size"], cfg["padded_vocab_size"]
        a, g, d, eps = cfg["num_attention_heads"], cfg["num_query_groups"], cfg["kv_channels"], cfg["layernorm_epsilon"]
        bias = cfg["add_qkv_bias"]
        self.cfg = cfg
        self.embed_tokens = torch.nn.Embedding(v, h)
        self.layers = torch.nn.ModuleList()
        for _ in range(cfg["num_layers"]):
            blk = torch.nn.Module()
            blk.input_norm, blk.post_attention_norm = llama.RmsNorm(h, eps), llama.RmsNorm(h, eps)
            blk.q_norm, blk.k_norm = llama.RmsNorm(d, eps), llama.RmsNorm(d, eps)
            blk.q_proj = torch.nn.Linear(h, a * d, bias=bias)
            blk.k_proj = torch.nn.Linear(h, g * d, bias=bias)
            blk.v_proj = torch.nn.Linear(h, g * d, bias=bias)
            blk.o_proj = torch.nn.Linear(a * d, h, bias=False)
            blk.gate_proj, blk.up_proj = torch.nn.Linear(h, f, bias=False), torch.nn.Linear(h, f, bias=False)
            blk.down_proj = torch.nn.Linear(f, h, bias=False)
            self.layers.append(blk)
        self.norm = llama.RmsNorm(h, eps)
        self.lm_head = torch.nn.Linear(h, v, bias=False)

    @torch.no_grad()
    def load_megatron(self, params):
        c = self.cfg
        h, f, g, d = c["hidden_size"], c["ffn_hidden_size"], c["num_query_groups"], c["kv_channels"]
        hpg = c["num_attention_heads"] // g
        p32 = {k: t.to(torch.float32) for k, t in params.items()}
        self.embed_tokens.weight.copy_(p32["embedding.word_embeddings.weight"])
        for i, blk in enumerate(self.layers):
            p = f"decoder.layers.{i}.self_attention."
            w = p32[p + "linear_qkv.weight"].view(g, hpg + 2, d, h)
            blk.q_proj.weight.copy_(w[:, :hpg].reshape(-1, h))
            blk.k_proj.weight.copy_(w[:, hpg].reshape(-1, h))
            blk.v_proj.weight.copy_(w[:, hpg + 1].reshape(-1, h))
            if c["add_qkv_bias"]:
                bias = p32[p + "linear_qkv.bias"].view(g, hpg + 2, d)
                blk.q_proj.bias.copy_(bias[:, :hpg].reshape(-1))
                blk.k_proj.bias.copy_(bias[:, hpg].reshape(-1))
                blk.v_proj.bias.copy_(bias[:, hpg + 1].reshape(-1))
            if c["qk_layernorm"]:
                blk.q_norm.weight.copy_(p32[p + "q_layernorm.weight"])
                blk.k_norm.weight.copy_(p32[p + "k_layernorm.weight"])
            blk.o_proj.weight.copy_(p32[p + "linear_proj.weight"])
            q = f"decoder.layers.{i}."
            blk.input_norm.weight.copy_(p32[q + "input_layernorm.weight"])
            blk.post_attention_norm.weight.copy_(p32[q + "pre_mlp_layernorm.weight"])
            blk.gate_proj.weight.copy_(p32[q + "mlp.linear_fc1.weight"][:f])
            blk.up_proj.weight.copy_(p32[q + "mlp.linear_fc1.weight"][f:])
            blk.down_proj.weight.copy_(p32[q + "mlp.linear_fc2.weight"])
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
        x = self.embed_tokens(tokens)
        for blk in self.layers:
            n = blk.input_norm(x)
            q, k = blk.q_proj(n).view(b, s, a, d), blk.k_proj(n).view(b, s, g, d)
            if c["qk_layernorm"]:
                q, k = blk.q_norm(q), blk.k_norm(k)
            q = apply_rope(q.transpose(1, 2))
            k = apply_rope(k.transpose(1, 2)).repeat_interleave(a // g, dim=1)
            v = blk.v_proj(n).view(b, s, g, d).transpose(1, 2).repeat_interleave(a // g, dim=1)
            probs = F.softmax(torch.matmul(q, k.transpose(2, 3)) * d ** -0.5 + mask, dim=-1)
            x = x + blk.o_proj(torch.matmul(probs, v).transpose(1, 2).reshape(b, s, a * d))
            n = blk.post_attention_norm(x)
            x = x + blk.down_proj(F.silu(blk.gate_proj(n)) * blk.up_proj(n))
        logits = self.lm_head(self.norm(x))
        loss = F.cross_entropy(logits.reshape(b * s, -1), labels.reshape(b * s))
        return logits.transpose(0, 1), loss


def verify(params, tokens, labels, logits64, loss64, cfg):
    model = NnQwen(cfg)
    model.load_megatron(params)
    logits32, loss32 = model(tokens, labels)
    err = (logits32.double() - logits64).abs().max().item()
    lerr = abs(loss32.item() - loss64.item())
    print(f"verify: HF-style float32 model vs float64 reference: max |dlogits| = {err:.3e}, |dloss| = {lerr:.3e}")
    names = ["decoder.layers.0.self_attention.linear_qkv.weight", "decoder.layers.1.self_attention.linear_proj.weight",
             "decoder.layers.0.mlp.linear_fc1.weight", "output_layer.weight"]
    names += [n for n, _ in param_shapes(cfg) if "layernorm.weight" in n and "self_attention" in n]
    names += [n for n, _ in param_shapes(cfg) if n.endswith("linear_qkv.bias")]
    worst = ref.finite_difference_check(forward, params, tokens, labels, cfg, names)
    print(f"verify: finite-difference gradient check ({3 * len(names)} entries), worst "
          f"|fd - analytic| / (1e-7 + 1e-5 |analytic|) = {worst:.3f} (must be < 1)")
    return err < 1e-5 and lerr < 1e-5 and worst < 1.0


def write_fixture(kind, output, check):
    cfg = CONFIGS[kind]
    torch.manual_seed(cfg["seed"])
    shapes = param_shapes(cfg)
    gen = torch.Generator().manual_seed(cfg["seed"])
    params = ref.init_params(cfg, gen, shapes)
    tokens, labels = ref.make_batch(cfg, gen)
    with torch.no_grad():
        logits, loss = forward(params, tokens, labels, cfg)
    if check and not verify(params, tokens, labels, logits, loss, cfg):
        sys.exit(f"verify: FAILED ({kind}) — the float64 reference and the HF-style model disagree")
    step_losses, grad_norms, first_grads, finals = ref.train(params, tokens, labels, cfg, log=True,
                                                             forward_fn=forward)
    assert step_losses[0] == loss.item(), (step_losses[0], loss.item())
    if check and not ref.verify_fp32_training(params, tokens, labels, cfg, step_losses, grad_norms,
                                              first_grads, finals, forward_fn=forward):
        sys.exit(f"verify: FAILED ({kind}) — a float32 replay drifts from the float64 reference")
    f32 = lambda t: t.detach().to(torch.float32).contiguous()  # noqa: E731
    tensors = {name: f32(params[name]) for name, _ in shapes}
    tensors["tokens"] = tokens.to(torch.int32)
    tensors["labels"] = labels.to(torch.int32)
    tensors["logits"] = f32(logits)
    tensors["loss"] = f32(loss.reshape(1))
    for name, _ in shapes:
        tensors["grad." + name] = f32(first_grads[name])
    tensors["step_losses"] = torch.tensor(step_losses, dtype=torch.float32)
    tensors["grad_norms"] = torch.tensor(grad_norms, dtype=torch.float32)
    for name, _ in shapes:
        tensors["final." + name] = f32(finals[name])
    metadata = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in cfg.items()}
    metadata.update({
        "format": f"megatron.cpp {kind} golden fixture v1",
        "tokens_layout": "b,s",
        "logits_layout": "s,b,padded_vocab",
        "qkv_layout": "per query group g: q of its hpg heads, then k, then v (weight rows and bias)",
        "qk_layernorm": str(cfg["qk_layernorm"]).lower(),
        "generator": "tests/reference/qwen_reference.py (torch %s, float64)" % torch.__version__.split("+")[0],
    })
    ref.write_safetensors(output, tensors, metadata)
    back, _ = ref.read_safetensors(output)
    assert list(back) == list(tensors), "read-back tensor order differs"
    for name, t in tensors.items():
        assert torch.equal(back[name], t), f"read-back mismatch for {name}"
    print(f"{kind}: loss {loss.item():.10f}; wrote {output}: {len(tensors)} tensors, "
          f"{os.path.getsize(output)} bytes")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=sorted(CONFIGS), help="write one fixture")
    ap.add_argument("--no-verify", dest="verify", action="store_false", help="skip the self-checks")
    args = ap.parse_args()
    torch.set_num_threads(1)  # bit-for-bit reproducible reductions
    for kind in sorted(CONFIGS):
        if args.only in (None, kind):
            write_fixture(kind, os.path.join(ref.REPO_ROOT, "tests", "fixtures", f"{kind}_tiny.safetensors"),
                          args.verify)


if __name__ == "__main__":
    main()
