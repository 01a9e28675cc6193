// Which Hugging Face tensors each Megatron-core parameter is made of, and the
// layout change between them (full, unsharded tensors; TP/PP slicing is the
// parameter registry's business). One table serves both directions.
//
// gpt2 (Conv1D weights are (in, out); "transformer." prefix optional):
//   wte (v, h)                 -> embedding.word_embeddings.weight (padded v, h)
//   wpe                        -> embedding.position_embeddings.weight
//   h.L.ln_1 / ln_2            -> decoder.layers.L.input_layernorm / pre_mlp_layernorm
//   h.L.attn.c_attn (h, 3h), columns [q | k | v]
//                              -> self_attention.linear_qkv (3h, h), rows per head [q; k; v]
//   h.L.attn.c_proj (h, h)     -> self_attention.linear_proj, transposed
//   h.L.mlp.c_fc (h, f)        -> mlp.linear_fc1 (f, h), transposed
//   h.L.mlp.c_proj (f, h)      -> mlp.linear_fc2 (h, f), transposed
//   ln_f                       -> decoder.final_layernorm
// llama (nn.Linear weights are (out, in), as Megatron's):
//   model.embed_tokens         -> embedding.word_embeddings.weight (padded)
//   layers.L.self_attn.{q,k,v}_proj -> linear_qkv, per query group: its heads' q
//                                 rows, then its k, then its v (no RoPE permutation:
//                                 both use rotate-half)
//   layers.L.self_attn.o_proj  -> linear_proj
//   layers.L.mlp.{gate,up}_proj -> mlp.linear_fc1 = [gate; up]
//   layers.L.mlp.down_proj     -> mlp.linear_fc2
//   layers.L.input_layernorm / post_attention_layernorm -> input_layernorm / pre_mlp_layernorm
//   model.norm                 -> decoder.final_layernorm
//   lm_head (untied)           -> output_layer.weight (padded)
// mixtral (as llama, but every MLP is block_sparse_moe; experts whole, never
// split over TP):
//   layers.L.block_sparse_moe.gate (E, h)       -> mlp.router.weight
//   layers.L.block_sparse_moe.experts.N.{w1,w3} -> mlp.experts.local_experts.N.linear_fc1
//                                                  = [w1 (gate); w3 (up)]
//   layers.L.block_sparse_moe.experts.N.w2      -> mlp.experts.local_experts.N.linear_fc2
// qwen2, qwen3: llama's names, plus hf_qwen.h's (q/k/v biases, q_norm/k_norm);
// qwen3_moe: qwen3's, with mlp.gate and mlp.experts.N.{gate,up,down}_proj on
// the MoE layers (hf_qwen.h).
// deepseek_v3, deepseek_v2: hf_deepseek.h's; V3's multi-token prediction
// depth k (mtp.layers.k.*) under model.layers.<num_layers + k>.
// The Hugging Face vocabulary tensors hold `vocab_rows` rows: the tokenizer's
// vocabulary, or more when config.json's vocab_size is itself padded (a GPT-2
// of 50304 rows for 50257 tokens); Megatron's padded rows beyond them are
// copies of the last row (as Megatron's checkpoint saver pads), which the
// export cuts off.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "convert/hf_config.h"
#include "model/params.h"

namespace mt {

enum class HfLayout : uint8_t {
  kCopy,       // same layout
  kTranspose,  // Conv1D (in, out) <-> Linear (out, in)
  kVocab,      // rows [0, vocab_rows) the same; padded rows = the last (export: cut)
  kGpt2Qkv,    // c_attn weight or bias: [q | k | v] <-> per head [q; k; v]
  kLlamaQkv,   // q_proj, k_proj, v_proj <-> per query group [q heads; k; v]
  kGateUp,     // gate_proj, up_proj (Mixtral's w1, w3) <-> [gate; up], two halves
  // DeepSeek-V3 with rope_interleave false: the rope features of each head's
  // q rows (q_b_proj / q_proj) or of kv_a_proj_with_mqa's rope key stored as
  // halves [x_0..x_{d/2-1} | x_{d/2}..] <-> Megatron's interleaved pairs
  // (row 2j = half j of the first, 2j+1 = of the second); the rest copied.
  kMlaQRopeHalves,
  kMlaKvRopeHalves,
};

// One Megatron parameter's Hugging Face names (relative to the layer, or the
// model) and layout: a row of a family's name table.
struct HfRule {
  std::vector<std::string> hf;
  HfLayout layout;
};

struct HfTensor {
  std::string name;            // Hugging Face name
  std::vector<int64_t> shape;  // Hugging Face shape
  int64_t numel() const;
};

// One Megatron parameter (its full tensor: global_rows x global_cols) and the
// Hugging Face tensors it is made of.
struct HfParamMap {
  const ParamSpec* param = nullptr;  // in the TP1/PP1 registry given to hf_param_maps
  HfLayout layout = HfLayout::kCopy;
  std::vector<HfTensor> hf;
};

// The whole model's table, in `full`'s parameter order (a registry of the
// whole model: TP 1, one stage with every layer). `gpt2_prefix` is "" or
// "transformer." (the names a GPT-2 folder uses; ignored for llama and mixtral).
// `vocab_rows`: rows of the vocabulary tensors, in [vocab_size,
// padded_vocab_size] (0: vocab_size).
std::vector<HfParamMap> hf_param_maps(HfFamily f, const ParamRegistry& full,
                                      const std::string& gpt2_prefix, int64_t vocab_rows = 0);

// Megatron's full tensor from the Hugging Face ones (hf[i]: m.hf[i]'s data).
void hf_to_megatron(const HfParamMap& m, const ModelConfig& cfg,
                    const std::vector<const float*>& hf, float* full);

// The inverse: the Hugging Face tensors from Megatron's full tensor.
void megatron_to_hf(const HfParamMap& m, const ModelConfig& cfg, const float* full,
                    const std::vector<float*>& hf);

}  // namespace mt
