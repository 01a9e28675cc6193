#!/usr/bin/python3
"""Independent PyTorch reference for Hugging Face DeepSeek-V3 and DeepSeek-V2 checkpoints.

The judge of `megatron convert` for DeepseekV3ForCausalLM / DeepseekV2ForCausalLM
folders. Written from Hugging Face transformers' published model definitions
(modeling_deepseek_v3.py: DeepseekV3RMSNorm, DeepseekV3RotaryEmbedding,
apply_rotary_pos_emb_interleave / apply_rotary_pos_emb, yarn_get_mscale,
DeepseekV3Attention (q_proj or q_a_proj + q_a_layernorm + q_b_proj,
kv_a_proj_with_mqa = [latent; rope key], kv_a_layernorm, kv_b_proj = per head
[k_nope; v], softmax scale qk_head_dim^-0.5 times mscale(factor, mscale_all_dim)^2
under rope_scaling), DeepseekV3TopkRouter (sigmoid scores, scores +
e_score_correction_bias to choose, groups ranked by the sum of their top 2,
topk_group groups kept, the others' keys filled with 0.0, top-k; weights the
chosen scores, renormalised with norm_topk_prob (+1e-20), times
routed_scaling_factor), DeepseekV3MoE (routed experts plus shared_experts of
moe_intermediate_size * n_shared_experts), DeepseekV3DecoderLayer (dense MLP on
layers < first_k_dense_replace); modeling_deepseek_v2.py: DeepseekV2Moe
(softmax over all experts, greedy top-k or group_limited_greedy: groups ranked
by their max; weights times routed_scaling_factor, never renormalised),
apply_rotary_emb on complex pairs, softmax scale qk_head_dim^-0.5 times
mscale(factor, mscale_all_dim)^2 under rope_scaling as DeepSeek's own
modeling_deepseek.py for V2 computes it (transformers' port leaves the factor out);
modeling_rope_utils._compute_yarn_parameters), not from this repository's C++
code. Every computation runs in float64 (the YaRN frequencies and angles in
float32, as HF), batch-first (1, s, ...).

  random --version v3|v2 --out DIR --seed S [sizes...]
      writes DIR/config.json and DIR/model.safetensors (float32, HF names).
  random ... --mtp N
      V3 with N multi-token prediction depths (model.layers.<L + k>.*: enorm,
      hnorm, eh_proj, a decoder layer, shared_head.norm, and copies of the
      embedding and lm_head as embed_tokens and shared_head.head).
  losses --hf-dir DIR --data-prefix PREFIX --seq-length S [--padded-vocab P]
      the training losses of every sample of a Megatron dataset of one
      document of S tokens (the document and its first token again):
      {"lm_loss", "mtp_losses": [depth 1, ...]}.
  score --hf-dir DIR --json FILE [--tol 1e-4]
      as hf_models.py's score: recomputes the log-probabilities of a
      `megatron generate --output-json` file; prints max_abs_diff and the
      smallest router gap (chosen vs next key, group kept vs next group).

Run with Debian's /usr/bin/python3 (python3-torch). See README.md.
"""

import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_models import (InputError, judge_log_probs, load_generate_json, load_hf_dir,  # noqa: E402
                       write_safetensors)


def version_of(cfg):
    mt = cfg.get("model_type")
    if mt == "deepseek_v3":
        return "v3"
    if mt == "deepseek_v2":
        return "v2"
    raise InputError(f"config.json model_type {mt!r} is not 'deepseek_v3' or 'deepseek_v2'")


def rms_norm(x, w, eps):  # DeepseekV3RMSNorm (float64 here)
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def get_mscale(scale, mscale=1):  # yarn_get_mscale
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def rope_frequencies(cfg):
    """(inv_freq float32 (d/2,), attention_scaling): default or yarn (_compute_yarn_parameters)."""
    d, base = cfg["qk_rope_head_dim"], float(cfg.get("rope_theta", 10000.0))
    pos_freqs = base ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d)
    rs = cfg.get("rope_scaling")
    if rs is None:
        return 1.0 / pos_freqs, 1.0
    if rs.get("rope_type", rs.get("type")) != "yarn":
        raise InputError(f"rope_scaling {rs} is not yarn (this reference computes default and yarn)")
    factor = rs["factor"]
    orig = rs.get("original_max_position_embeddings") or cfg["max_position_embeddings"]
    mscale, mscale_all_dim = rs.get("mscale"), rs.get("mscale_all_dim")
    if mscale and mscale_all_dim:
        att = float(get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim))
    else:
        att = get_mscale(factor)
    beta_fast, beta_slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

    def correction_dim(rotations):
        return (d * math.log(orig / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = math.floor(correction_dim(beta_fast)), math.ceil(correction_dim(beta_slow))
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(d // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    extrapolation = 1 - ramp
    inv = (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation
    return inv, att


def softmax_scale(cfg, v):
    qk = cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]
    scale = qk ** -0.5
    rs = cfg.get("rope_scaling")
    if rs is not None and rs.get("mscale_all_dim", 0):  # DeepSeek's modeling_deepseek.py, V2 and V3
        m = get_mscale(rs["factor"], rs["mscale_all_dim"])
        scale = scale * m * m
    return scale


def rope_v3(x, cos, sin, interleave):
    """apply_rotary_pos_emb(_interleave): x (b, heads, s, d)."""
    if interleave:
        b, hh, s, d = x.shape
        x = x.view(b, hh, s, d // 2, 2).transpose(4, 3).reshape(b, hh, s, d)
    return x * cos + rotate_half(x) * sin


def rope_v2(x, freqs, att):
    """apply_rotary_emb: pairs (2i, 2i+1) as complex numbers times att * e^{i angle}."""
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    rot = torch.polar(torch.full_like(freqs, att), freqs)  # (s, d/2)
    return torch.view_as_real(xc * rot).flatten(3)


def attention(cfg, v, W, p, y, rope):
    b, s, _ = y.shape
    a = cfg["num_attention_heads"]
    dn, dr, dv, r = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"], cfg["kv_lora_rank"]
    if cfg.get("q_lora_rank") is None:
        q = y @ W(p + "q_proj.weight").t()
    else:
        q = rms_norm(y @ W(p + "q_a_proj.weight").t(), W(p + "q_a_layernorm.weight"), 1e-6) @ W(p + "q_b_proj.weight").t()
    q = q.view(b, s, a, dn + dr).transpose(1, 2)
    q_pass, q_rot = torch.split(q, [dn, dr], dim=-1)
    ckv = y @ W(p + "kv_a_proj_with_mqa.weight").t()
    k_pass, k_rot = torch.split(ckv, [r, dr], dim=-1)
    kv = rms_norm(k_pass, W(p + "kv_a_layernorm.weight"), 1e-6) @ W(p + "kv_b_proj.weight").t()
    kv = kv.view(b, s, a, dn + dv).transpose(1, 2)
    k_pass, value = torch.split(kv, [dn, dv], dim=-1)
    k_rot = k_rot.view(b, 1, s, dr)
    if v == "v3":
        cos, sin = rope
        interleave = cfg.get("rope_interleave", True)
        q_rot, k_rot = rope_v3(q_rot, cos, sin, interleave), rope_v3(k_rot, cos, sin, interleave)
    else:
        freqs, att = rope
        q_rot, k_rot = rope_v2(q_rot, freqs, att), rope_v2(k_rot, freqs, att)
    k_rot = k_rot.expand(*k_pass.shape[:-1], -1)
    query, key = torch.cat((q_pass, q_rot), dim=-1), torch.cat((k_pass, k_rot), dim=-1)
    scores = (query @ key.transpose(2, 3)) * softmax_scale(cfg, v)
    future = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
    probs = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    ctx = (probs @ value).transpose(1, 2).reshape(b, s, a * dv)
    return ctx @ W(p + "o_proj.weight").t()


def mlp(W, p, y):
    return (F.silu(y @ W(p + "gate_proj.weight").t()) * (y @ W(p + "up_proj.weight").t())) @ W(p + "down_proj.weight").t()


def route_v3(cfg, W, p, x, gaps):
    E, k = cfg["n_routed_experts"], cfg["num_experts_per_tok"]
    G, g = cfg.get("n_group") or 1, cfg.get("topk_group") or 1
    scores = (x @ W(p + "gate.weight").t()).sigmoid()  # (n, E)
    key = scores + W(p + "gate.e_score_correction_bias")[None, :]
    group_scores = key.view(-1, G, E // G).topk(2, dim=-1)[0].sum(dim=-1)  # (n, G)
    group_idx = torch.topk(group_scores, k=g, dim=-1)[1]
    mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
    kept = mask.unsqueeze(-1).expand(-1, G, E // G).reshape(-1, E).bool()
    masked = key.masked_fill(~kept, 0.0)
    idx = torch.topk(masked, k=k, dim=-1)[1]
    if not bool(kept.gather(1, idx).all()):
        raise InputError("a token's choice fell on a masked group (HF fills their keys with 0.0 and a kept key is "
                         "negative): HF's quirk, not Megatron's -inf; choose another --seed")
    if g < G:
        ranked = torch.sort(group_scores, dim=-1, descending=True).values
        gaps.append((ranked[:, g - 1] - ranked[:, g]).min().item())
    ranked = torch.sort(key.masked_fill(~kept, float("-inf")), dim=-1, descending=True).values
    if k < g * (E // G):
        gaps.append((ranked[:, k - 1] - ranked[:, k]).min().item())
    w = scores.gather(1, idx)
    if cfg.get("norm_topk_prob", True):
        w = w / (w.sum(dim=-1, keepdim=True) + 1e-20)
    return idx, w * cfg.get("routed_scaling_factor", 2.5)


def route_v2(cfg, W, p, x, gaps):
    E, k = cfg["n_routed_experts"], cfg["num_experts_per_tok"]
    probs = torch.softmax(x @ W(p + "gate.weight").t(), dim=-1)
    method = cfg.get("topk_method", "greedy")
    if method == "greedy":
        key = probs
    elif method == "group_limited_greedy":
        G, g = cfg["n_group"], cfg["topk_group"]
        group_scores = probs.view(-1, G, E // G).max(dim=-1).values
        group_idx = torch.topk(group_scores, k=g, dim=-1)[1]
        mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
        kept = mask.unsqueeze(-1).expand(-1, G, E // G).reshape(-1, E).bool()
        key = probs.masked_fill(~kept, 0.0)
        if g < G:
            ranked = torch.sort(group_scores, dim=-1, descending=True).values
            gaps.append((ranked[:, g - 1] - ranked[:, g]).min().item())
    else:
        raise InputError(f"topk_method {method!r} is not greedy or group_limited_greedy")
    w, idx = torch.topk(key, k=k, dim=-1)
    ranked = torch.sort(key, dim=-1, descending=True).values
    if k < E:
        gaps.append((ranked[:, k - 1] - ranked[:, k]).min().item())
    return idx, w * cfg.get("routed_scaling_factor", 1.0)


def moe(cfg, v, W, p, y, gaps):
    b, s, h = y.shape
    x = y.reshape(-1, h)
    idx, w = (route_v3 if v == "v3" else route_v2)(cfg, W, p, x, gaps)
    out = torch.zeros_like(x)
    for e in range(cfg["n_routed_experts"]):
        tok, j = torch.where(idx == e)
        if tok.numel():
            out.index_add_(0, tok, mlp(W, f"{p}experts.{e}.", x[tok]) * w[tok, j, None])
    out = out.view(b, s, h)
    if v == "v3" or cfg.get("n_shared_experts") is not None:
        out = out + mlp(W, p + "shared_experts.", y)
    return out


def is_moe_layer(cfg, i):
    return i >= cfg.get("first_k_dense_replace", 0) and i % cfg.get("moe_layer_freq", 1) == 0


def decoder_layer(cfg, v, W, i, x, rope, gaps):
    """DeepseekV3DecoderLayer model.layers.<i>: x (1, s, h) -> (1, s, h)."""
    eps, p = cfg.get("rms_norm_eps", 1e-6), f"model.layers.{i}."
    x = x + attention(cfg, v, W, p + "self_attn.", rms_norm(x, W(p + "input_layernorm.weight"), eps), rope)
    y = rms_norm(x, W(p + "post_attention_layernorm.weight"), eps)
    return x + (moe(cfg, v, W, p + "mlp.", y, gaps) if is_moe_layer(cfg, i) else mlp(W, p + "mlp.", y))


def model_hidden(cfg, w, ids, gaps):
    """ids (s,) -> (the final norm's output (1, s, h), W, rope), float64."""
    v = version_of(cfg)
    W = lambda name: w[name].to(torch.float64)
    s = ids.numel()
    inv, att = rope_frequencies(cfg)
    freqs = torch.arange(s, dtype=torch.int64).float()[:, None] * inv[None, :]  # float32 (s, d/2)
    if v == "v3":
        emb = torch.cat((freqs, freqs), dim=-1)
        rope = ((emb.cos() * att).double(), (emb.sin() * att).double())
    else:
        rope = (freqs.double(), att)
    x = W("model.embed_tokens.weight")[ids][None]  # (1, s, h)
    for i in range(cfg["num_hidden_layers"]):
        x = decoder_layer(cfg, v, W, i, x, rope, gaps)
    return rms_norm(x, W("model.norm.weight"), cfg.get("rms_norm_eps", 1e-6)), W, rope


def model_logits(cfg, w, ids, gaps):
    """ids (s,) -> logits (s, vocab) float64, batch-first inside."""
    x, W, _ = model_hidden(cfg, w, ids, gaps)
    return (x @ W("lm_head.weight").t())[0]


def padded(logits, rows):
    """Megatron's logits over a vocabulary padded to `rows` (the import copies
    the last row of the embedding and output layer into the padding rows,
    which the softmax of training counts)."""
    extra = rows - logits.shape[-1]
    return torch.cat((logits, logits[..., -1:].expand(*logits.shape[:-1], extra)), dim=-1) if extra > 0 else logits


def training_losses(cfg, w, tokens, gaps, rows):
    """The losses of one training sample tokens (s + 1,): the main token-mean
    cross-entropy and each multi-token prediction depth's. Depth k (layer
    L + k - 1: enorm, hnorm, eh_proj over [enorm(embedding) | hnorm(h)], the
    decoder layer, shared_head.norm and .head) at position i sees the previous
    depth's output there and the embedding of input token i + k, and predicts
    label i + k; the last k positions (past the sample) count for nothing, as
    Megatron's rolled loss mask. Depth k > 1 takes depth k - 1's normed output
    (Megatron's MultiTokenPredictionBlock; DeepSeek-V3 has one depth)."""
    v, eps = version_of(cfg), cfg.get("rms_norm_eps", 1e-6)
    s, L = tokens.numel() - 1, cfg["num_hidden_layers"]
    ids, labels = tokens[:s], tokens[1:]
    h, W, rope = model_hidden(cfg, w, ids, gaps)
    out = {"lm_loss": F.cross_entropy(padded((h @ W("lm_head.weight").t())[0], rows), labels).item(),
           "mtp_losses": []}
    for k in range(1, cfg.get("num_nextn_predict_layers", 0) + 1):
        p = f"model.layers.{L + k - 1}."
        shifted = torch.cat((ids[k:], torch.zeros(k, dtype=ids.dtype)))
        e = rms_norm(W(p + "embed_tokens.weight")[shifted][None], W(p + "enorm.weight"), eps)
        x = torch.cat((e, rms_norm(h, W(p + "hnorm.weight"), eps)), dim=-1) @ W(p + "eh_proj.weight").t()
        h = rms_norm(decoder_layer(cfg, v, W, L + k - 1, x, rope, gaps), W(p + "shared_head.norm.weight"), eps)
        logits = padded((h @ W(p + "shared_head.head.weight").t())[0], rows)
        out["mtp_losses"].append(F.cross_entropy(logits[:s - k], labels[k:]).item())
    return out


def make_config(a):
    c = {"architectures": ["DeepseekV3ForCausalLM" if a.version == "v3" else "DeepseekV2ForCausalLM"],
         "model_type": "deepseek_v3" if a.version == "v3" else "deepseek_v2",
         "vocab_size": a.vocab_size, "hidden_size": a.hidden, "intermediate_size": a.ffn,
         "moe_intermediate_size": a.moe_ffn, "num_hidden_layers": a.layers, "num_attention_heads": a.heads,
         "num_key_value_heads": a.heads, "n_shared_experts": a.shared, "n_routed_experts": a.experts,
         "num_experts_per_tok": a.topk, "routed_scaling_factor": a.scaling,
         "kv_lora_rank": a.kv_lora_rank, "q_lora_rank": a.q_lora_rank if a.q_lora_rank > 0 else None,
         "qk_rope_head_dim": a.rope_dim, "qk_nope_head_dim": a.nope_dim, "v_head_dim": a.v_dim,
         "first_k_dense_replace": a.dense_layers, "norm_topk_prob": a.version == "v3",
         "hidden_act": "silu", "max_position_embeddings": a.max_pos, "initializer_range": 0.02,
         "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "attention_bias": False, "attention_dropout": 0.0,
         "tie_word_embeddings": False, "use_cache": True, "bos_token_id": 1, "eos_token_id": 2}
    if a.version == "v3":
        c.update({"n_group": a.groups, "topk_group": a.topk_group, "rope_interleave": not a.rope_halves,
                  "num_nextn_predict_layers": a.mtp})
    elif a.mtp:
        raise InputError("--mtp: DeepSeek-V2 folders have no multi-token prediction layers")
    else:
        c.update({"topk_method": "group_limited_greedy" if a.groups > 1 else "greedy",
                  "n_group": a.groups if a.groups > 1 else None,
                  "topk_group": a.topk_group if a.groups > 1 else None})
    if a.yarn:
        factor, orig, mscale, mscale_all_dim = a.yarn
        c["rope_scaling"] = {"type": "yarn", "factor": factor, "original_max_position_embeddings": int(orig),
                             "beta_fast": 32, "beta_slow": 1, "mscale": mscale, "mscale_all_dim": mscale_all_dim}
    return c


def shapes_of(c):
    h, a = c["hidden_size"], c["num_attention_heads"]
    dq = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    out = [("model.embed_tokens.weight", (c["vocab_size"], h), "matrix")]
    L = c["num_hidden_layers"]
    for i in range(L + c.get("num_nextn_predict_layers", 0)):
        p = f"model.layers.{i}."
        if i >= L:  # a multi-token prediction depth: its own tensors, then a decoder layer's
            out += [(p + "enorm.weight", (h,), "norm"), (p + "hnorm.weight", (h,), "norm"),
                    (p + "eh_proj.weight", (h, 2 * h), "matrix"), (p + "shared_head.norm.weight", (h,), "norm")]
        out.append((p + "input_layernorm.weight", (h,), "norm"))
        s = p + "self_attn."
        if c["q_lora_rank"] is None:
            out.append((s + "q_proj.weight", (a * dq, h), "matrix"))
        else:
            out += [(s + "q_a_proj.weight", (c["q_lora_rank"], h), "matrix"),
                    (s + "q_a_layernorm.weight", (c["q_lora_rank"],), "norm"),
                    (s + "q_b_proj.weight", (a * dq, c["q_lora_rank"]), "matrix")]
        out += [(s + "kv_a_proj_with_mqa.weight", (c["kv_lora_rank"] + c["qk_rope_head_dim"], h), "matrix"),
                (s + "kv_a_layernorm.weight", (c["kv_lora_rank"],), "norm"),
                (s + "kv_b_proj.weight", (a * (c["qk_nope_head_dim"] + c["v_head_dim"]), c["kv_lora_rank"]), "matrix"),
                (s + "o_proj.weight", (h, a * c["v_head_dim"]), "matrix"),
                (p + "post_attention_layernorm.weight", (h,), "norm")]

        def mlp_shapes(x, f):
            return [(x + "gate_proj.weight", (f, h), "matrix"), (x + "up_proj.weight", (f, h), "matrix"),
                    (x + "down_proj.weight", (h, f), "matrix")]
        if is_moe_layer(c, i):
            out.append((p + "mlp.gate.weight", (c["n_routed_experts"], h), "router"))
            if c["model_type"] == "deepseek_v3":
                out.append((p + "mlp.gate.e_score_correction_bias", (c["n_routed_experts"],), "bias"))
            for e in range(c["n_routed_experts"]):
                out += mlp_shapes(f"{p}mlp.experts.{e}.", c["moe_intermediate_size"])
            out += mlp_shapes(p + "mlp.shared_experts.", c["moe_intermediate_size"] * c["n_shared_experts"])
        else:
            out += mlp_shapes(p + "mlp.", c["intermediate_size"])
    out += [("model.norm.weight", (h,), "norm"), ("lm_head.weight", (c["vocab_size"], h), "matrix")]
    return out


def cmd_random(a):
    if a.experts % a.groups or a.topk > a.experts or a.dense_layers >= a.layers:
        raise InputError("--experts must divide by --groups, --topk <= --experts, --dense-layers < --layers")
    c = make_config(a)
    gen = torch.Generator().manual_seed(a.seed)
    scale = {"matrix": a.matrix_std, "bias": a.bias_std, "router": 0.2}
    tensors = {}
    for name, shape, kind in shapes_of(c):
        z = torch.randn(shape, generator=gen, dtype=torch.float64)
        tensors[name] = (1.0 + 0.1 * z if kind == "norm" else scale[kind] * z).to(torch.float32)
    for k in range(a.mtp):  # each depth's copies of the shared embedding and output layer
        p = f"model.layers.{c['num_hidden_layers'] + k}."
        tensors[p + "embed_tokens.weight"] = tensors["model.embed_tokens.weight"].clone()
        tensors[p + "shared_head.head.weight"] = tensors["lm_head.weight"].clone()
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as fh:
        json.dump(c, fh, indent=2)
        fh.write("\n")
    write_safetensors(os.path.join(a.out, "model.safetensors"), tensors)
    back_cfg, back = load_hf_dir(a.out)
    if back_cfg != c or not all(torch.equal(back[n], t) for n, t in tensors.items()):
        raise SystemExit("random: FAILED — the folder read back differs from what was written")
    # The routing must be decisive on a sample of tokens (no near ties a float32 run could flip).
    gaps = []
    with torch.no_grad():
        model_logits(c, back, torch.arange(min(24, c["vocab_size"])) % c["vocab_size"], gaps)
    n = sum(t.numel() for t in tensors.values())
    print(f"wrote {a.out}: {c['model_type']}, {len(tensors)} tensors, {n} parameters, seed {a.seed}, "
          f"smallest router gap {min(gaps) if gaps else float('nan'):.3e}")


def cmd_score(a):
    cfg, w = load_hf_dir(a.hf_dir)
    version_of(cfg)
    prompt, tokens, theirs = load_generate_json(a.json, cfg["vocab_size"])
    seq = prompt + tokens
    gaps = []
    with torch.no_grad():
        logits = model_logits(cfg, w, torch.tensor(seq[:-1], dtype=torch.int64), gaps)
    return judge_log_probs(logits, prompt, tokens, theirs, gaps, a.tol)


def read_first_document(prefix):
    """The tokens of the one document of a Megatron indexed dataset (PREFIX.idx/.bin)."""
    codes = {1: torch.uint8, 2: torch.int8, 3: torch.int16, 4: torch.int32, 5: torch.int64, 8: torch.int16}
    with open(prefix + ".idx", "rb") as fh:
        head = fh.read(9 + 8 + 1 + 8 + 8)
        if head[:9] != b"MMIDIDX\x00\x00":
            raise InputError(f"{prefix}.idx is not a Megatron indexed dataset index")
        code, count = head[17], int.from_bytes(head[18:26], "little")
        if code not in codes or count != 1:
            raise InputError(f"{prefix}.idx: dtype code {code}, {count} sequences (want one document)")
        n = int.from_bytes(fh.read(4), "little")
    with open(prefix + ".bin", "rb") as fh:
        raw = torch.frombuffer(bytearray(fh.read()), dtype=codes[code])[:n].to(torch.int64)
    return raw & 0xFFFF if code == 8 else raw  # uint16 read as int16


def cmd_losses(a):
    cfg, w = load_hf_dir(a.hf_dir)
    doc = read_first_document(a.data_prefix)
    s = a.seq_length
    if doc.numel() != s:
        raise InputError(f"the document has {doc.numel()} tokens, not --seq-length {s}: only then is every "
                         f"sample of a run over it the same, the document and its first token again")
    gaps = []
    with torch.no_grad():
        out = training_losses(cfg, w, torch.cat((doc, doc[:1])), gaps, a.padded_vocab or cfg["vocab_size"])
    out["smallest_router_gap"] = min(gaps) if gaps else None
    print(json.dumps(out))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("random", help="write a random DeepSeek folder (config.json + model.safetensors)")
    r.add_argument("--version", choices=("v3", "v2"), required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--seed", type=int, required=True)
    r.add_argument("--vocab-size", type=int, default=256)
    r.add_argument("--hidden", type=int, default=64)
    r.add_argument("--layers", type=int, default=3)
    r.add_argument("--heads", type=int, default=4)
    r.add_argument("--ffn", type=int, default=96, help="intermediate_size (the dense layers)")
    r.add_argument("--moe-ffn", type=int, default=16, help="moe_intermediate_size")
    r.add_argument("--experts", type=int, default=16)
    r.add_argument("--topk", type=int, default=4)
    r.add_argument("--groups", type=int, default=4, help="n_group (v2: 1 = greedy)")
    r.add_argument("--topk-group", type=int, default=2)
    r.add_argument("--shared", type=int, default=1, help="n_shared_experts")
    r.add_argument("--scaling", type=float, default=2.5, help="routed_scaling_factor")
    r.add_argument("--dense-layers", type=int, default=1, help="first_k_dense_replace")
    r.add_argument("--q-lora-rank", type=int, default=32, help="0: null (a plain q_proj)")
    r.add_argument("--kv-lora-rank", type=int, default=32)
    r.add_argument("--rope-dim", type=int, default=8, help="qk_rope_head_dim")
    r.add_argument("--nope-dim", type=int, default=16, help="qk_nope_head_dim")
    r.add_argument("--v-dim", type=int, default=16, help="v_head_dim")
    r.add_argument("--max-pos", type=int, default=128)
    r.add_argument("--yarn", type=lambda t: [float(x) for x in t.split(",")], default=None,
                   help="rope_scaling yarn as FACTOR,ORIGINAL,MSCALE,MSCALE_ALL_DIM (default none)")
    r.add_argument("--rope-halves", action="store_true",
                   help="v3: rope_interleave false (RoPE rotates the stored halves)")
    r.add_argument("--matrix-std", type=float, default=0.1)
    r.add_argument("--bias-std", type=float, default=0.1, help="std of e_score_correction_bias")
    r.add_argument("--mtp", type=int, default=0, help="v3: num_nextn_predict_layers (with their tensors)")
    t = sub.add_parser("losses", help="the training losses (main, each MTP depth) of the samples of a "
                                      "one-document dataset, as JSON")
    t.add_argument("--hf-dir", required=True)
    t.add_argument("--data-prefix", required=True, help="PREFIX of PREFIX.idx / PREFIX.bin")
    t.add_argument("--seq-length", type=int, required=True)
    t.add_argument("--padded-vocab", type=int, default=0,
                   help="the run's padded vocabulary (its extra logits copy the last token's)")
    s = sub.add_parser("score", help="compare a `megatron generate --output-json` file with this reference")
    s.add_argument("--hf-dir", required=True)
    s.add_argument("--json", required=True)
    s.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args()
    torch.set_num_threads(1)
    try:
        sys.exit({"score": cmd_score, "losses": cmd_losses, "random": cmd_random}[a.cmd](a))
    except InputError as e:
        print(f"{a.cmd}: error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
