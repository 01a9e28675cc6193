// The Qwen2, Qwen3 and Qwen3-MoE adapters (Qwen2ForCausalLM,
// Qwen3ForCausalLM, Qwen3MoeForCausalLM): their config.json keys and name
// tables, both directions, in one place.
//
//   qwen2: Llama's block (RMSNorm, RoPE rope_theta, SwiGLU, grouped-query
//          attention, tied or untied output) with biases on q_proj, k_proj and
//          v_proj only: --disable-bias-linear --add-qkv-bias;
//          self_attn.{q,k,v}_proj.bias -> linear_qkv.bias, per query group
//          [its heads' q; k; v] as the weight's rows.
//   qwen3: Llama's block with head_dim (-> --kv-channels; QwenConfig's default
//          128) and an RMSNorm over each head's q and k before RoPE
//          (self_attn.q_norm / k_norm.weight, (head_dim)) -> --qk-layernorm
//          (self_attention.q_layernorm / k_layernorm.weight); no biases.
//   qwen3_moe: qwen3's attention; each MLP a Qwen3MoeSparseMoeBlock or, on
//          the layers mlp_only_layers names or decoder_sparse_step skips
//          (sparse: (layer + 1) % step == 0), a dense MLP of
//          intermediate_size -> --moe-layer-freq's per-layer list.
//          num_experts experts of moe_intermediate_size, num_experts_per_tok
//          per token; router mlp.gate (E, h) -> mlp.router.weight; experts
//          mlp.experts.N.{gate,up,down}_proj -> local_experts.N.linear_fc1 =
//          [gate; up], linear_fc2. Routing: softmax over all experts, top-k;
//          norm_topk_prob true renormalises the k (Megatron's default router:
//          top-k on the logits, softmax over the k), false (the class's
//          default) does not (--moe-router-pre-softmax). router_aux_loss_coef
//          -> --moe-aux-loss-coeff; output_router_logits (what the forward
//          returns) is ignored; no shared expert. Exported when a model has
//          experts and --qk-layernorm: the dense layers as mlp_only_layers.
//
// use_sliding_window true: the window (sliding_window W -> --window-size
// W-1,0) is on the layers >= max_window_layers (or those layer_types names
// sliding_attention); on every layer it converts, on none it is inert, on
// some only it is refused (one window for all layers here). Exported with a
// window: use_sliding_window true, max_window_layers 0.
// Refused by file and key (megatron.cpp would compute another function):
// rope_scaling (any type), rope_parameters other than the default RoPE,
// a window on some layers only, sliding_attention layers without
// use_sliding_window, Qwen3's attention_bias true (biases on q/k/v and
// o_proj), hidden_act not silu. sliding_window / max_window_layers with
// use_sliding_window false are inert.
#pragma once
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "convert/hf_config.h"
#include "convert/hf_weights.h"
#include "model/config.h"

namespace mt {

// config.json of a qwen2 / qwen3 / qwen3_moe folder (f) as a ModelConfig, not finalized
// (model_config_from_hf's contract).
ModelConfig qwen_config_from_hf(const nlohmann::json& c, const std::string& path, HfFamily f);

// Turns `j`, Llama's config.json of `c` (hf_config_from_model), into f's.
void qwen_config_to_hf(const ModelConfig& c, HfFamily f, nlohmann::json& j);

// f's layer name table: `llama`'s plus the q/k/v biases (qwen2) or the q/k
// norms (qwen3, and qwen3_moe's attention: its experts are hf_weights.cc's).
const std::map<std::string, HfRule>& qwen_layer_rules(HfFamily f,
                                                      const std::map<std::string, HfRule>& llama);

}  // namespace mt
