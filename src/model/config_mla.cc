// ModelConfig's multi-latent attention and YaRN: their checks (Megatron's
// MLATransformerConfig and validate_args), the RoPE scalings the tables take,
// and MLA's parameter count.
#include <string_view>

#include "core/checked_math.h"
#include "core/error.h"
#include "model/config.h"

namespace mt {

RopeScaling ModelConfig::yarn_scaling(bool enabled) const {
  RopeScaling s;
  s.yarn = enabled;
  s.yarn_factor = rotary_scaling_factor;
  s.yarn_original_max_position_embeddings = yarn_original_max_position_embeddings;
  s.beta_fast = yarn_beta_fast;
  s.beta_slow = yarn_beta_slow;
  s.mscale = mscale;
  s.mscale_all_dim = mscale_all_dim;
  return s;
}

RopeScaling ModelConfig::rope_scaling() const {
  RopeScaling s = yarn_scaling(position_embedding_type == "yarn");
  s.enabled = use_rope_scaling;
  s.factor = rope_scaling_factor;
  s.low_freq_factor = rope_scaling_low_freq_factor;
  s.high_freq_factor = rope_scaling_high_freq_factor;
  s.original_max_position_embeddings = rope_scaling_original_max_position_embeddings;
  return s;
}

void ModelConfig::check_mla_flags() const {
  MT_CHECK(rope_type.empty() || rope_type == "rope" || rope_type == "yarn", "--rope-type '",
           rope_type, "' is not one of rope, yarn");
  const bool yarn = position_embedding_type == "yarn" ||
                    (multi_latent_attention && mla_rope_type() == "yarn");
  if (yarn) check_rope_scaling(yarn_scaling(true));
  if (!multi_latent_attention) {
    // Megatron's core_transformer_config_from_args asserts this.
    MT_CHECK(rope_type.empty() || rope_type == "rope", "--rope-type ", rope_type,
             " is for multi-latent attention (standard attention takes rope only); fix: "
             "--position-embedding-type yarn for YaRN on the standard attention, or add "
             "--multi-latent-attention");
    const ModelConfig d;
    MT_CHECK(q_lora_rank == d.q_lora_rank && kv_lora_rank == d.kv_lora_rank &&
                 qk_head_dim == d.qk_head_dim && qk_pos_emb_head_dim == d.qk_pos_emb_head_dim &&
                 v_head_dim == d.v_head_dim,
             "MLA sizes (--q-lora-rank, --kv-lora-rank, --qk-head-dim, --qk-pos-emb-head-dim, "
             "--v-head-dim) were given without --multi-latent-attention; fix: add "
             "--multi-latent-attention, or drop them");
    return;
  }
  MT_CHECK(q_lora_rank >= 0, "--q-lora-rank ", q_lora_rank,
           " must be > 0 (or left out: a plain q projection)");
  MT_CHECK(kv_lora_rank > 0, "--kv-lora-rank ", kv_lora_rank, " must be > 0");
  MT_CHECK(qk_head_dim > 0, "--qk-head-dim ", qk_head_dim, " must be > 0");
  MT_CHECK(qk_pos_emb_head_dim >= 2 && qk_pos_emb_head_dim % 2 == 0, "--qk-pos-emb-head-dim ",
           qk_pos_emb_head_dim, " must be even and >= 2 (RoPE rotates pairs)");
  MT_CHECK(v_head_dim > 0, "--v-head-dim ", v_head_dim, " must be > 0");
  MT_CHECK(v_head_dim <= qk_head_dim + qk_pos_emb_head_dim, "--v-head-dim ", v_head_dim,
           " is over the query/key head size --qk-head-dim + --qk-pos-emb-head-dim = ",
           qk_head_dim + qk_pos_emb_head_dim, " (megatron.cpp's attention core runs the values "
           "padded to the key size); fix: a value head of at most that size");
  // Megatron's validate_args and MLATransformerConfig refuse these.
  MT_CHECK(!group_query_attention, "--group-query-attention with --multi-latent-attention: "
           "Megatron-LM refuses the pair (MLA's keys and values come from one latent); fix: "
           "drop --group-query-attention");
  // What megatron.cpp's MLA block does not build.
  MT_CHECK(!add_qkv_bias, "--add-qkv-bias with --multi-latent-attention: MLA has no linear_qkv "
           "(its projections have no bias, as Megatron-LM's); fix: drop --add-qkv-bias");
  MT_CHECK(window_size.empty() || window_left() < 0, "--window-size with "
           "--multi-latent-attention is not built in megatron.cpp; fix: drop --window-size");
  MT_CHECK(rotary_percent == 1.f, "--rotary-percent ", rotary_percent,
           " with --multi-latent-attention is not built in megatron.cpp (MLA rotates all of its "
           "--qk-pos-emb-head-dim features); fix: drop --rotary-percent");
  MT_CHECK(!use_rope_scaling, "--use-rope-scaling with --multi-latent-attention: MLA's RoPE is "
           "plain or YaRN (--rope-type); fix: drop --use-rope-scaling");
}

int64_t mla_attention_parameters(const ModelConfig& c) {
  constexpr std::string_view what =
      "MLA parameter count (--hidden-size, --num-attention-heads, --q-lora-rank, --kv-lora-rank, "
      "--qk-head-dim, --qk-pos-emb-head-dim, --v-head-dim)";
  const int64_t h = c.hidden_size, a = c.num_attention_heads;
  const int64_t dq = checked_add(c.qk_head_dim, c.qk_pos_emb_head_dim, what);
  const int64_t q_rows = checked_mul(a, dq, what);
  int64_t n = 0;
  if (c.q_lora_rank > 0)  // down (r_q x h), up (a·dq x r_q)
    n = checked_mul(c.q_lora_rank, checked_add(h, q_rows, what), what);
  else
    n = checked_mul(q_rows, h, what);
  const int64_t kv_down = checked_mul(checked_add(c.kv_lora_rank, c.qk_pos_emb_head_dim, what), h,
                                      what);
  const int64_t kv_up =
      checked_mul(checked_mul(a, checked_add(c.qk_head_dim, c.v_head_dim, what), what),
                  c.kv_lora_rank, what);
  const int64_t proj = checked_mul(h, checked_mul(a, c.v_head_dim, what), what);
  n = checked_add(n, checked_add(kv_down, checked_add(kv_up, proj, what), what), what);
  if (c.add_bias()) n = checked_add(n, h, what);
  if (c.qk_layernorm) {  // the latents' norms: weight (and bias with LayerNorm)
    const int64_t per = c.rms_norm() ? 1 : 2;
    n = checked_add(n, per * (c.kv_lora_rank + c.q_lora_rank), what);
  }
  return n;
}

}  // namespace mt
