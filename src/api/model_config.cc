// megatron::ModelConfig (include/megatron/config.h): its copies to and from
// mt::ModelConfig, its check and parameter count, and the named sizes
// (wizard/named_models.h: published config.json files through the converter's reader).
#include "api/model_config.h"

#include "wizard/config_prompt.h"
#include "wizard/named_models.h"

namespace mt {

namespace {

// Every field of megatron::ModelConfig: the same name in mt::ModelConfig.
#define MT_PUBLIC_MODEL_FIELDS(X) X(num_layers) X(hidden_size) X(ffn_hidden_size) \
  X(num_attention_heads) X(group_query_attention) X(num_query_groups) X(kv_channels) \
  X(seq_length) X(max_position_embeddings) X(vocab_size) X(make_vocab_size_divisible_by) \
  X(padded_vocab_size) X(normalization) X(layernorm_epsilon) X(apply_layernorm_1p) \
  X(qk_layernorm) X(position_embedding_type) X(rotary_base) X(rotary_percent) \
  X(use_rope_scaling) X(rope_scaling_factor) X(rope_scaling_low_freq_factor) \
  X(rope_scaling_high_freq_factor) X(rope_scaling_original_max_position_embeddings) X(swiglu) \
  X(squared_relu) X(mlp_kind) X(disable_bias_linear) X(add_qkv_bias) X(window_size) \
  X(untie_embeddings_and_output_weights) X(init_method_std) X(hidden_dropout) \
  X(attention_dropout) X(multi_latent_attention) X(q_lora_rank) X(kv_lora_rank) X(qk_head_dim) \
  X(qk_pos_emb_head_dim) X(v_head_dim) X(rope_type) X(rotary_scaling_factor) X(mscale) \
  X(mscale_all_dim) X(yarn_original_max_position_embeddings) X(yarn_beta_fast) X(yarn_beta_slow) \
  X(num_experts) X(moe_ffn_hidden_size) X(moe_layer_freq) X(moe_shared_expert_intermediate_size) \
  X(moe_router_topk) X(moe_router_pre_softmax) X(moe_router_dtype) X(moe_router_score_function) \
  X(moe_router_topk_scaling_factor) X(moe_router_num_groups) X(moe_router_group_topk) \
  X(moe_router_enable_expert_bias) X(moe_router_bias_update_rate) \
  X(moe_router_load_balancing_type) X(moe_aux_loss_coeff) X(moe_z_loss_coeff) \
  X(moe_expert_capacity_factor) X(moe_token_drop_policy) X(moe_pad_expert_input_to_capacity) \
  X(moe_token_dispatcher_type) X(moe_grouped_gemm) X(mtp_num_layers) X(mtp_loss_scaling_factor)

}  // namespace

ModelConfig private_model_config(const megatron::ModelConfig& m) {
  ModelConfig c;
#define MT_COPY(f) c.f = m.f;
  MT_PUBLIC_MODEL_FIELDS(MT_COPY)
#undef MT_COPY
  return c;
}

megatron::ModelConfig public_model_config(const ModelConfig& c) {
  megatron::ModelConfig m;
#define MT_COPY(f) m.f = c.f;
  MT_PUBLIC_MODEL_FIELDS(MT_COPY)
#undef MT_COPY
  return m;
}

std::string error_message(const Error& e) { return error_reason(e.what()); }

}  // namespace mt

namespace megatron {

void check_model_config(const ModelConfig& m) {
  mt::config_errors([&] {
    mt::ModelConfig c = mt::private_model_config(m);
    c.check_flag_ranges();
    c.finalize(1);
  });
}

int64_t count_parameters(const ModelConfig& m) {
  return mt::config_errors([&] {
    mt::ModelConfig c = mt::private_model_config(m);
    c.check_flag_ranges();
    c.finalize(1);
    return mt::count_parameters(c);
  });
}

std::vector<NamedModel> named_models() {
  std::vector<NamedModel> out;
  for (const mt::NamedModel& m : mt::named_models()) out.push_back({m.name, m.source});
  return out;
}

ModelConfig named_model(const std::string& name) {
  const mt::NamedModel* m = mt::find_named_model(name);
  if (m == nullptr) {
    std::string names;
    for (const mt::NamedModel& n : mt::named_models())
      names += (names.empty() ? "" : ", ") + std::string(n.name);
    throw ConfigError("'" + name + "' is no named model size; fix: one of " + names);
  }
  return mt::config_errors([&] { return mt::public_model_config(mt::named_model_config(*m)); });
}

}  // namespace megatron
