#!/usr/bin/python3
"""Writes a large random Hugging Face Llama folder without holding it in memory.

For bench/convert_memory.sh: `megatron convert` must stream tensor by tensor,
so it has to be tried on a model larger than half the machine's RAM. The
weights are written one tensor at a time (peak memory: the largest tensor),
float32, HF names (LlamaForCausalLM), with the shapes of
tests/reference/hf_models.py's llama family; the values are N(0, 0.02) from a
seeded torch generator (norm weights 1).

  make_big_hf.py --out DIR --hidden H --layers L --heads A --kv-heads G --ffn F --vocab V
"""

import argparse
import json
import os
import struct

import torch


def shapes(h, L, a, g, f, v):
    d = h // a
    out = [("model.embed_tokens.weight", (v, h))]
    for i in range(L):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", (h,)),
                (p + "self_attn.q_proj.weight", (a * d, h)),
                (p + "self_attn.k_proj.weight", (g * d, h)),
                (p + "self_attn.v_proj.weight", (g * d, h)),
                (p + "self_attn.o_proj.weight", (h, a * d)),
                (p + "post_attention_layernorm.weight", (h,)),
                (p + "mlp.gate_proj.weight", (f, h)),
                (p + "mlp.up_proj.weight", (f, h)),
                (p + "mlp.down_proj.weight", (h, f))]
    out += [("model.norm.weight", (h,)), ("lm_head.weight", (v, h))]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=5632)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    sh = shapes(a.hidden, a.layers, a.heads, a.kv_heads, a.ffn, a.vocab)
    header, off = {}, 0
    for name, s in sh:
        n = 4
        for x in s:
            n *= x
        header[name] = {"dtype": "F32", "shape": list(s), "data_offsets": [off, off + n]}
        off += n
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * ((8 - (8 + len(blob)) % 8) % 8)
    gen = torch.Generator().manual_seed(a.seed)
    with open(os.path.join(a.out, "model.safetensors"), "wb") as fh:
        fh.write(struct.pack("<Q", len(blob)))
        fh.write(blob)
        for name, s in sh:
            t = torch.ones(s) if len(s) == 1 else torch.randn(s, generator=gen) * 0.02
            fh.write(t.to(torch.float32).contiguous().numpy().tobytes())
            del t
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": a.vocab,
           "hidden_size": a.hidden, "intermediate_size": a.ffn, "num_hidden_layers": a.layers,
           "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads,
           "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "hidden_act": "silu", "tie_word_embeddings": False, "rope_scaling": None,
           "attention_bias": False, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32"}
    with open(os.path.join(a.out, "config.json"), "w") as fh:
        json.dump(cfg, fh, indent=2)
    print(json.dumps({"params": off // 4, "bytes": off}))


if __name__ == "__main__":
    main()
