// The DeepSeek-V3 and DeepSeek-V2 adapters (DeepseekV3ForCausalLM,
// DeepseekV2ForCausalLM): their config.json keys and name tables, both
// directions, in one place. Both are Megatron core's multi-latent attention
// (model/blocks/mla_block.h) with a mixture of experts after
// first_k_dense_replace dense layers:
//
//   attention (per layer, under self_attn.):
//     q_proj (q_lora_rank null)             -> self_attention.linear_q_proj
//     q_a_proj, q_a_layernorm, q_b_proj     -> linear_q_down_proj, q_layernorm, linear_q_up_proj
//     kv_a_proj_with_mqa                    -> linear_kv_down_proj (rows: the kv_lora_rank
//                                              latent, then the qk_rope_head_dim rope key)
//     kv_a_layernorm                        -> kv_layernorm
//     kv_b_proj (per head: qk_nope_head_dim k rows, then v_head_dim v rows)
//                                           -> linear_kv_up_proj (the same rows)
//     o_proj                                -> linear_proj
//   q_b_proj / q_proj's rows per head are [nope; rope], as linear_q_up_proj's.
//   All copied unchanged: HF applies RoPE to the rope features as interleaved
//   pairs (V3's rope_interleave true: apply_rotary_pos_emb_interleave; V2's
//   complex pairs), which is Megatron's MLA rotation (de-interleave, then
//   rotate-half; the order of the rotated features is the same in q and k, so
//   q·k does not see it). rope_interleave false (rotate-half on the stored
//   order: pairs (j, j + d/2)) imports with the rope rows of q_b_proj / q_proj
//   and kv_a_proj_with_mqa permuted into pairs (deepseek_rope_layouts); the
//   export always writes the interleaved form, rope_interleave true.
//   The latent norms: --qk-layernorm (HF's have eps 1e-6 always, so
//   rms_norm_eps must be 1e-6: one epsilon here).
//   rope_scaling yarn -> --rope-type yarn: factor (--rotary-scaling-factor),
//     original_max_position_embeddings, beta_fast, beta_slow, mscale,
//     mscale_all_dim; none -> --rope-type rope. HF's YaRN attention factor is
//     mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both are
//     given, else mscale(factor, 1) (Megatron's: the ratio always): the second
//     case converts as mscale 1, mscale_all_dim 0 when mscale_all_dim is 0,
//     and is refused when only mscale is 0. The softmax scale is
//     qk_head_dim^-0.5 x mscale(factor, mscale_all_dim)^2 for both versions, as
//     DeepSeek's own modeling_deepseek.py (the code the V2 and V3 checkpoints
//     ship for trust_remote_code) and Megatron compute it; transformers'
//     DeepseekV2Attention leaves the factor out (a V2-Lite folder, mscale_all_dim
//     0.707, scores differently there).
//   MLP: layers < first_k_dense_replace (and, V2, those moe_layer_freq skips)
//     a dense mlp.{gate,up,down}_proj of intermediate_size; the others
//     mlp.gate (E, h) -> mlp.router.weight, mlp.experts.N.{gate,up,down}_proj
//     -> experts.local_experts.N.linear_fc1 = [gate; up], linear_fc2, and
//     mlp.shared_experts.* (n_shared_experts x moe_intermediate_size) ->
//     mlp.shared_experts.linear_fc1 / linear_fc2.
//   V3 routing (DeepseekV3TopkRouter): sigmoid scores; the choice on scores +
//     mlp.gate.e_score_correction_bias (-> mlp.router.expert_bias,
//     --moe-router-enable-expert-bias); n_group groups ranked by the sum of
//     their top 2 keys, topk_group kept (--moe-router-num-groups /
//     --moe-router-group-topk; Megatron ranks by the sum of the top
//     topk / topk_group, so num_experts_per_tok must be 2 x topk_group, else
//     refused; n_group 1 is no limit); the chosen scores renormalised
//     (norm_topk_prob true; false is refused) times routed_scaling_factor
//     (--moe-router-topk-scaling-factor).
//   V2 routing (DeepseekV2Moe): softmax over all experts, the chosen
//     probabilities times routed_scaling_factor, never renormalised
//     (--moe-router-pre-softmax); topk_method greedy, or group_limited_greedy
//     (groups ranked by their max) when num_experts_per_tok == topk_group
//     (Megatron's sum of the top 1), else refused.
//   Multi-token prediction (V3's num_nextn_predict_layers -> --mtp-num-layers):
//     depth k's model.layers.<L + k>.{enorm, hnorm, eh_proj} -> mtp.layers.k.*
//     (eh_proj's input [enorm(embedding) | hnorm(hidden)], as Megatron's),
//     shared_head.norm -> final_layernorm, its layer's tensors (the table
//     above) -> transformer_layer.*; its embed_tokens and shared_head.head are
//     copies of the model's (deepseek_mtp_copies). A folder whose config
//     counts depths without holding their tensors imports without them.
// Refused by file and key: attention_bias, a hidden_act other than silu,
// num_key_value_heads other than the heads, scoring_func / topk_method other
// than the above, rope_scaling other than yarn, V2's rope_scaling with
// mscale_all_dim (HF's V2 port leaves the softmax scale unscaled, unlike
// Megatron's MLA); an MTP depth's copy that differs from the model's tensor.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert/hf_config.h"
#include "convert/hf_weights.h"
#include "model/config.h"

namespace mt {

bool is_deepseek(HfFamily f);

// config.json of a deepseek_v3 / deepseek_v2 folder as a ModelConfig, not
// finalized (model_config_from_hf's contract).
ModelConfig deepseek_config_from_hf(const nlohmann::json& c, const std::string& path, HfFamily f);

// The family a model with multi-latent attention exports to (deepseek_v3 with
// sigmoid scores, deepseek_v2 with softmax ones); `off` gets what it has that
// the family cannot hold, one entry each.
HfFamily deepseek_family_of(const ModelConfig& c, std::vector<std::string>& off);

// Turns `j`, Llama's config.json of `c` (hf_config_from_model), into f's.
void deepseek_config_to_hf(const ModelConfig& c, HfFamily f, nlohmann::json& j);

// f's layer name table: `base` (Llama's norms and dense MLP, the experts of
// add_moe_rules under mlp.) with the MLA attention, the shared experts and
// (V3) the expert bias.
const std::map<std::string, HfRule>& deepseek_layer_rules(HfFamily f,
                                                          const std::map<std::string, HfRule>& base);

// config.json `c` of family f with rope_interleave false: the q and kv_a
// maps of `maps` (hf_param_maps') permute their rope rows (kMla*RopeHalves).
void deepseek_rope_layouts(const nlohmann::json& c, HfFamily f, std::vector<HfParamMap>& maps);

// The names of a multi-token prediction depth's own tensors (Megatron's
// mtp.layers.<k>.*; its transformer_layer.* take the layer table under
// model.layers.<L + k>.), relative to model.layers.<L + k>.
const std::map<std::string, HfRule>& deepseek_mtp_rules();

// The copies a DeepSeek-V3 folder holds of the shared embedding and output
// layer, one pair (copy, original) each: every depth's embed_tokens and
// shared_head.head (Megatron shares them; the import checks that they equal
// the originals, the export writes them).
std::vector<std::pair<std::string, std::string>> deepseek_mtp_copies(const ModelConfig& c);

}  // namespace mt
