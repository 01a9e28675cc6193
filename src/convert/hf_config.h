// Hugging Face config.json <-> ModelConfig for the families that are a
// configuration of the one decoder (DESIGN.md "One model, configured"):
//
//   gpt2  (GPT2LMHeadModel):  LayerNorm, learned absolute positions, GELU
//         (tanh: "gelu_new"), biases, tied output layer;
//   llama (LlamaForCausalLM): RMSNorm, RoPE (rotate-half, as Megatron core's
//         default), SwiGLU, no linear biases, grouped-query attention, tied or
//         untied output layer;
//   mixtral (MixtralForCausalLM): Llama's attention and norms, every MLP a
//         mixture of experts (Megatron's MoE with num_local_experts experts of
//         intermediate_size, top num_experts_per_tok, no shared expert, no
//         token dropping): Mixtral's softmax over all experts, top-k and
//         renormalisation is Megatron's default router (top-k on the logits,
//         softmax over the k); router_aux_loss_coef -> --moe-aux-loss-coeff.
//         router_jitter_noise (training-only noise, like dropout) is not
//         carried.
//
//   mistral (MistralForCausalLM): Llama's with a sliding window: hf_mistral.h.
//   qwen2, qwen3, qwen3_moe (Qwen2ForCausalLM, Qwen3ForCausalLM,
//         Qwen3MoeForCausalLM): hf_qwen.h.
//   deepseek_v3, deepseek_v2 (DeepseekV3ForCausalLM, DeepseekV2ForCausalLM): multi-latent
//         attention and DeepSeek's mixture of experts: hf_deepseek.h.
//   A sliding_window (Mistral, Mixtral, Qwen's every-layer window) is
//   --window-size W-1,0 (hf_mistral.h).
//
// Llama's rope_scaling llama3 (Llama 3.1+) is --use-rope-scaling (hf_rope_scaling.h).
// Anything of these families this decoder does not compute (another rope_scaling,
// attention/MLP biases in Llama, another activation, a head_dim that is not
// hidden/heads, an untied GPT-2, Qwen's window on some layers only, more
// experts per token than experts, ...) is refused naming the key and its value, never
// converted into another function in silence.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "model/config.h"

namespace mt {

enum class HfFamily {
  kGpt2, kLlama, kMixtral, kQwen2, kQwen3, kQwen3Moe, kMistral, kDeepseekV3, kDeepseekV2
};

// "gpt2" | "llama" | "mixtral" | "qwen2" | "qwen3" | "qwen3_moe" | "mistral" | "deepseek_v3" |
// "deepseek_v2"
const char* hf_family_name(HfFamily f);

// The attention heads of a Llama-like config.json (hidden_size and
// num_attention_heads already in `m`), read once for every family:
// num_key_value_heads -> the query groups (grouped-query attention when fewer
// than the heads; absent: one per head, or an error if `kv_required`, as for
// the classes whose default is not "one per head"); head_dim -> --kv-channels
// (absent: `head_dim_default`, the class's, or hidden / heads when 0). The
// head dimension must be even (RoPE) and the heads a multiple of the groups.
void hf_read_attention_heads(const nlohmann::json& c, const std::string& path, bool kv_required,
                             int64_t head_dim_default, ModelConfig& m);

// The routed experts of an MoE config.json into `m`: `experts_key`
// (num_local_experts, num_experts) experts of `moe_ffn_key`'s size (each a
// SwiGLU MLP, no shared expert, no token dropping), num_experts_per_tok of
// them per token, router_aux_loss_coef -> --moe-aux-loss-coeff (aux_loss).
void hf_read_experts(const nlohmann::json& c, const std::string& path, const char* experts_key,
                     const char* moe_ffn_key, ModelConfig& m);

// config.json (parsed; `path` for messages) as a ModelConfig, not finalized:
// vocab_size is config.json's (the caller sets the tokenizer's when that is
// smaller), seq_length = max_position_embeddings, dropout 0 (converted models
// carry none; set --hidden-dropout / --attention-dropout when fine-tuning).
// Every value finalize() would check is checked here first, so that a bad
// one is an mt::Error naming the file, the key, the value and the fix (never
// a train flag the user did not pass); sizes above limits no real model
// reaches are refused the same way, before anything is allocated.
ModelConfig model_config_from_hf(const nlohmann::json& config, const std::string& path,
                                 HfFamily* family);

// The family a (finalized) ModelConfig converts to; throws naming what has no
// Hugging Face equivalent.
HfFamily hf_family_of(const ModelConfig& c);

// config.json for `c` in family `f`. `tokenizer`: the checkpoint's tokenizer
// record (its eod / bos become eos_token_id / bos_token_id when known);
// `torch_dtype`: "float32" | "bfloat16"; `vocab_rows`: its vocab_size (the
// rows of the exported embedding).
nlohmann::json hf_config_from_model(const ModelConfig& c, HfFamily f,
                                    const nlohmann::json& tokenizer,
                                    const std::string& torch_dtype, int64_t vocab_rows);

}  // namespace mt
