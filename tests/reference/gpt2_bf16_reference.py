#!/usr/bin/python3
"""bf16 golden reference: writes tests/fixtures/gpt2_tiny_bf16.safetensors.

The same tiny GPT-2, parameters and batch as gpt2_reference.py, run the way
`megatron train --bf16` runs it (Megatron's bf16 model, no autocast): the
model's weights are the bf16 rounding of the fp32 main weights — every weight,
LayerNorm's and the biases and embeddings too — and their gradients flow
straight through to the main weights; the saved activations are bf16 — the
residual stream (embedding output, after attention, after the MLP), the FC1
output (GELU's input) and the GEMM inputs — with gradients straight through;
every matrix product takes bfloat16 operands and accumulates in higher
precision; the arithmetic of everything else — LayerNorm, GELU, softmax,
cross-entropy, bias adds, residual adds, the main weights, gradient
accumulation and AdamW — stays in full precision. In the
backward pass the incoming gradient is rounded to bf16 too before each
product (dX = r(dY)·r(W), dW = r(dY)ᵀ·r(X)), as a bf16 GEMM sees it.
The rounded products are evaluated in float64, so the only approximations
are the bf16 roundings themselves.

Attention: scores = r(q)·r(k)ᵀ, scaled by 1/sqrt(d) after the product;
ctx = r(P)·r(v). The output layer is r(y)·r(wte)ᵀ.

Stored: logits, loss, every gradient of step 0, and five AdamW steps (losses,
pre-clip grad norms, final weights), as in the fp32 fixture. --verify prints
how far this reference is from the fp32 one, so the C++ test's tolerance can
be chosen below that distance (the test must tell bf16 from fp32 apart).

Run: /usr/bin/python3 tests/reference/gpt2_bf16_reference.py [--output PATH]
"""

import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_reference as ref  # noqa: E402

DEFAULT_OUTPUT = os.path.join(ref.REPO_ROOT, "tests", "fixtures", "gpt2_tiny_bf16.safetensors")


def r16(x):
    """Round to the nearest bfloat16 value (ties to even), kept in float64."""
    return x.to(torch.bfloat16).to(torch.float64)


class Bf16MatMul(torch.autograd.Function):
    """a @ b with bf16 operands; backward rounds the incoming gradient as well."""

    @staticmethod
    def forward(ctx, a, b):
        ra, rb = r16(a), r16(b)
        ctx.save_for_backward(ra, rb)
        return ra @ rb

    @staticmethod
    def backward(ctx, g):
        ra, rb = ctx.saved_tensors
        rg = r16(g)
        return rg @ rb.transpose(-1, -2), ra.transpose(-1, -2) @ rg


def mm(a, b):
    return Bf16MatMul.apply(a, b)


class StoreBf16(torch.autograd.Function):
    """A value as megatron.cpp stores it in bf16: a main weight's bf16 model
    weight, or a saved activation; the gradient passes straight through."""

    @staticmethod
    def forward(ctx, w):
        return r16(w)

    @staticmethod
    def backward(ctx, g):
        return g


def causal_attention(qkv, heads):
    s, b, three_h = qkv.shape
    d = three_h // (3 * heads)
    qkv = qkv.view(s, b, heads, 3, d)
    q, k, v = (qkv[:, :, :, i, :].permute(1, 2, 0, 3) for i in range(3))  # (b, a, s, d)
    scores = mm(q, k.transpose(-1, -2)) / math.sqrt(d)
    future = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
    probs = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    return mm(probs, v).permute(2, 0, 1, 3).reshape(s, b, heads * d)


def forward(main_params, tokens, labels, cfg):
    params = {k: StoreBf16.apply(v) for k, v in main_params.items()}
    st = StoreBf16.apply
    eps = cfg["layernorm_epsilon"]
    b, s = tokens.shape
    wte = params["embedding.word_embeddings.weight"]
    wpe = params["embedding.position_embeddings.weight"]
    x = st(wte[tokens.t()] + wpe[:s].unsqueeze(1))  # (s, b, h) residual stream, stored bf16
    for i in range(cfg["num_layers"]):
        p = f"decoder.layers.{i}."
        P = lambda n: params[p + n]  # noqa: E731
        h1 = ref.layer_norm(x, P("input_layernorm.weight"), P("input_layernorm.bias"), eps)
        qkv = mm(h1, P("self_attention.linear_qkv.weight").t()) + P("self_attention.linear_qkv.bias")
        ctx = causal_attention(qkv, cfg["num_attention_heads"])
        x = st(x + (mm(ctx, P("self_attention.linear_proj.weight").t()) + P("self_attention.linear_proj.bias")))
        h2 = ref.layer_norm(x, P("pre_mlp_layernorm.weight"), P("pre_mlp_layernorm.bias"), eps)
        a = ref.gelu_tanh(st(mm(h2, P("mlp.linear_fc1.weight").t()) + P("mlp.linear_fc1.bias")))
        x = st(x + (mm(a, P("mlp.linear_fc2.weight").t()) + P("mlp.linear_fc2.bias")))
    y = ref.layer_norm(x, params["decoder.final_layernorm.weight"],
                       params["decoder.final_layernorm.bias"], eps)
    logits = mm(y, wte.t())
    flat = logits.reshape(s * b, -1)
    target = labels.t().reshape(s * b)
    loss = (torch.logsumexp(flat, dim=-1) - flat.gather(1, target.unsqueeze(1)).squeeze(1)).mean()
    return logits, loss


def rel(a, b):
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--output", default=DEFAULT_OUTPUT, help="fixture path (default: %(default)s)")
    args = ap.parse_args()

    torch.set_num_threads(1)
    cfg = ref.CONFIG
    gen = torch.Generator().manual_seed(cfg["seed"])
    params = ref.init_params(cfg, gen)
    tokens, labels = ref.make_batch(cfg, gen)

    with torch.no_grad():
        logits, loss = forward(params, tokens, labels, cfg)
        logits32, loss32 = ref.forward(params, tokens, labels, cfg)

    # The training loop of the fp32 reference, with this forward.
    saved_forward = ref.forward
    ref.forward = forward
    try:
        step_losses, grad_norms, first_grads, finals = ref.train(params, tokens, labels, cfg, log=True)
    finally:
        ref.forward = saved_forward
    _, _, grads32, finals32 = ref.train(params, tokens, labels, cfg)

    # How far bf16 is from fp32: the C++ test's tolerance must be well below it.
    print(f"bf16 vs fp32 reference: logits {rel(logits, logits32):.2e}, "
          f"loss {abs(loss.item() - loss32.item()) / loss32.item():.2e}")
    worst_grad = min(rel(first_grads[k], grads32[k]) for k in first_grads
                     if grads32[k].norm() > 1e-6)
    # Weights move little in five steps: compare the updates (final − initial).
    worst_final = min(rel(finals[k] - params[k], finals32[k] - params[k]) for k in finals
                      if (finals32[k] - params[k]).norm() > 1e-6)
    print(f"bf16 vs fp32 reference: smallest gradient difference {worst_grad:.2e}, "
          f"smallest weight-update difference {worst_final:.2e}")

    f32 = lambda t: t.detach().to(torch.float32).contiguous()  # noqa: E731
    tensors = {}
    for name, _ in ref.param_shapes(cfg):
        tensors[name] = f32(params[name])
    tensors["tokens"] = tokens.to(torch.int32)
    tensors["labels"] = labels.to(torch.int32)
    tensors["logits"] = f32(logits)
    tensors["loss"] = f32(loss.reshape(1))
    for name, _ in ref.param_shapes(cfg):
        tensors["grad." + name] = f32(first_grads[name])
    tensors["step_losses"] = torch.tensor(step_losses, dtype=torch.float32)
    tensors["grad_norms"] = torch.tensor(grad_norms, dtype=torch.float32)
    for name, _ in ref.param_shapes(cfg):
        tensors["final." + name] = f32(finals[name])
    metadata = dict(cfg)
    metadata.update({
        "format": "megatron.cpp gpt2 golden fixture v1",
        "precision": "bf16 weights (of fp32 main weights), bf16 residual stream and FC1 output, "
                     "bf16 GEMM operands (incoming gradients rounded too), float64 elsewhere",
        "tokens_layout": "b,s",
        "logits_layout": "s,b,padded_vocab",
        "qkv_layout": "row = head*3*d + which*d + e (which 0=q 1=k 2=v)",
        "generator": "tests/reference/gpt2_bf16_reference.py (torch %s)" % torch.__version__.split("+")[0],
    })
    ref.write_safetensors(args.output, tensors, metadata)
    back, _ = ref.read_safetensors(args.output)
    for name, t in tensors.items():
        assert torch.equal(back[name], t), f"read-back mismatch for {name}"
    print(f"loss {loss.item():.10f} (fp32 reference {loss32.item():.10f})")
    print(f"wrote {args.output}: {len(tensors)} tensors, {os.path.getsize(args.output)} bytes")


if __name__ == "__main__":
    main()
