// ModelConfig: the transformer's architecture knobs, named as Megatron-LM's
// flags. One decoder serves GPT-2 and Llama-style models (as Megatron core's
// TransformerConfig): normalization, position embedding, gated MLP, query
// groups, biases and the tied output layer are configuration, not code paths.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/rope_scaling.h"

namespace mt {

struct ModelConfig {
  int64_t num_layers = 4;
  int64_t hidden_size = 128;
  int64_t ffn_hidden_size = 0;  // 0 → 4 * hidden_size
  int64_t num_attention_heads = 4;
  int64_t seq_length = 64;
  int64_t max_position_embeddings = 0;  // 0 → seq_length
  int64_t vocab_size = 0;               // the tokenizer's size (before padding)
  int64_t make_vocab_size_divisible_by = 128;
  int64_t padded_vocab_size = 0;  // --padded-vocab-size, or set by finalize()
  float init_method_std = 0.02f;
  float hidden_dropout = 0.1f;
  float attention_dropout = 0.1f;
  float layernorm_epsilon = 1e-5f;  // --norm-epsilon (both norms)
  std::string normalization = "LayerNorm";                  // LayerNorm | RMSNorm
  std::string position_embedding_type = "learned_absolute";  // learned_absolute | rope | none
  float rotary_base = 10000.f;
  float rotary_percent = 1.f;
  // Llama 3.1's scaling of RoPE's frequencies (kernels/rope_scaling.h); Megatron
  // has the switch and the factor, the other three are ours (Megatron's fixed values).
  bool use_rope_scaling = false;
  float rope_scaling_factor = 8.f;
  float rope_scaling_low_freq_factor = 1.f;
  float rope_scaling_high_freq_factor = 4.f;
  int64_t rope_scaling_original_max_position_embeddings = 8192;
  bool swiglu = false;                // gated MLP: fc1 → [gate | up], silu(gate) * up
  bool squared_relu = false;          // non-gated MLP activation relu(x)^2 (else GELU)
  // A block registered by name (include/megatron/block.h) in the MLP slot of
  // every dense layer; "" the library's own MLP.
  std::string mlp_kind;
  bool apply_layernorm_1p = false;    // every norm scales by (1 + weight); weights start at 0
  bool group_query_attention = false;
  int64_t num_query_groups = 1;       // with group_query_attention (Megatron's default 1)
  bool disable_bias_linear = false;   // no biases in the linear layers
  // Attention options (Qwen2/Qwen3), the attention block's (model/blocks/attention_block.h).
  int64_t kv_channels = 0;            // head size d (0: hidden_size / num_attention_heads)
  bool qk_layernorm = false;          // a norm of --normalization over each head's q and k
  bool add_qkv_bias = false;          // a bias on linear_qkv even with --disable-bias-linear
  // Sliding-window attention (Megatron's --window-size "L,R", flash-attention's
  // window): query i sees keys i-L..i+R; causal, so R is 0. "" (or L = -1): none.
  std::string window_size;
  bool untie_embeddings_and_output_weights = false;
  // Multi-latent attention (DeepSeek-V2/V3; Megatron core's MLATransformerConfig,
  // model/blocks/mla_block.h): q and kv come from low-rank latents.
  bool multi_latent_attention = false;
  int64_t q_lora_rank = 0;             // 0: absent (Megatron's None): a plain q projection
  int64_t kv_lora_rank = 32;
  int64_t qk_head_dim = 128;           // a head's q/k part without RoPE
  int64_t qk_pos_emb_head_dim = 64;    // a head's q/k part with RoPE (the key's is shared)
  int64_t v_head_dim = 128;
  std::string rope_type;               // "" (MLA: yarn; else rope) | rope | yarn
  // YaRN (Megatron's YarnRotaryEmbedding): MLA's with rope type yarn, or the
  // whole model's with --position-embedding-type yarn (kernels/rope_scaling.h).
  float rotary_scaling_factor = 1.f;
  float mscale = 1.f;
  float mscale_all_dim = 0.f;
  int64_t yarn_original_max_position_embeddings = 4096;
  float yarn_beta_fast = 32.f;
  float yarn_beta_slow = 1.f;

  // Mixture of experts (Megatron core's TransformerConfig moe_* fields).
  // num_experts 0: every MLP is dense.
  int64_t num_experts = 0;
  int64_t moe_ffn_hidden_size = 0;       // an expert's ffn size (0 → ffn_hidden_size)
  std::string moe_layer_freq = "1";      // N (every N-th layer is MoE) or a list "[0,1,1,1]", "[0]+[1]*3"
  int64_t moe_shared_expert_intermediate_size = 0;  // a dense shared expert (0: none)
  int64_t moe_router_topk = 2;
  bool moe_router_pre_softmax = false;   // softmax over all experts, then top-k
  // The router's dtype in a bf16 run ("": the run's, as Megatron's default:
  // logits and probabilities rounded to bf16; "fp32": the GEMM's fp32 sums and
  // the routing math kept in fp32). fp32 runs route in fp32 either way.
  std::string moe_router_dtype;
  // DeepSeek-V3's routing (Megatron's topk_routing_with_score_function).
  std::string moe_router_score_function = "softmax";  // softmax | sigmoid
  float moe_router_topk_scaling_factor = 0.f;  // the chosen weights times it (0: Megatron's None)
  int64_t moe_router_num_groups = 0;   // group-limited routing: experts in G groups (0: none)
  int64_t moe_router_group_topk = 0;   // groups a token chooses its experts from (0: no limit)
  // A per-expert bias added to the sigmoid scores to choose the top-k, never
  // to weigh them; not trained: moved after each step toward the experts'
  // mean load (the parameter <prefix>router.expert_bias, ParamSpec::expert_bias).
  bool moe_router_enable_expert_bias = false;
  // Training knobs (not architecture: a checkpoint may resume with others).
  std::string moe_router_load_balancing_type = "aux_loss";  // aux_loss | seq_aux_loss | none
  float moe_aux_loss_coeff = 0.f;
  float moe_z_loss_coeff = 0.f;          // 0: no z-loss (Megatron's None)
  float moe_expert_capacity_factor = -1.f;  // < 0: absent (dropless; Megatron's None)
  std::string moe_token_drop_policy = "probs";  // probs | position
  bool moe_pad_expert_input_to_capacity = false;
  std::string moe_token_dispatcher_type = "allgather";  // allgather | alltoall
  bool moe_grouped_gemm = false;
  float moe_router_bias_update_rate = 1e-3f;  // the expert bias's step per iteration

  // Multi-token prediction (Megatron core's mtp_num_layers,
  // mtp_loss_scaling_factor; model/mtp.h): D extra depths on the last
  // pipeline stage, depth k predicting the token k + 1 ahead. 0: none
  // (Megatron's None).
  int64_t mtp_num_layers = 0;
  float mtp_loss_scaling_factor = 0.1f;  // the MTP loss (mean over depths) times this

  bool moe() const { return num_experts > 0; }
  bool mtp() const { return mtp_num_layers > 0; }
  int64_t moe_ffn() const { return moe_ffn_hidden_size > 0 ? moe_ffn_hidden_size : ffn_hidden_size; }
  // Whether global layer `layer` has an MoE MLP (moe_layer_freq); false without experts.
  bool is_moe_layer(int64_t layer) const;

  // Head size: --kv-channels, or hidden / heads (Megatron's default).
  int64_t head_dim() const {
    return kv_channels > 0 ? kv_channels : hidden_size / num_attention_heads;
  }
  // Width of the attention's query and context, a·d (linear_proj's input).
  int64_t query_projection_size() const { return num_attention_heads * head_dim(); }
  // Key/value heads: num_query_groups with grouped-query attention, else one per head.
  int64_t query_groups() const {
    return group_query_attention ? num_query_groups : num_attention_heads;
  }
  // --window-size's L (keys at positions >= query - L), -1 without a window.
  int64_t window_left() const;
  bool rms_norm() const { return normalization == "RMSNorm"; }
  // RoPE on the standard attention's q and k (plain, or YaRN-scaled).
  bool rope() const {
    return position_embedding_type == "rope" || position_embedding_type == "yarn";
  }
  // MLA's RoPE type: --rope-type, by default yarn (Megatron's MLATransformerConfig).
  std::string mla_rope_type() const { return rope_type.empty() ? "yarn" : rope_type; }
  // YaRN's values as the rope table takes them (enabled or not).
  RopeScaling yarn_scaling(bool enabled) const;
  bool learned_positions() const { return position_embedding_type == "learned_absolute"; }
  // The standard attention's scaling: Llama 3.1's, or YaRN's with
  // --position-embedding-type yarn.
  RopeScaling rope_scaling() const;
  bool add_bias() const { return !disable_bias_linear; }
  bool qkv_bias() const { return add_bias() || add_qkv_bias; }
  bool tied_output() const { return !untie_embeddings_and_output_weights; }
  // Rows of linear_qkv: (heads + 2 · groups) · head_dim.
  int64_t qkv_rows() const { return (num_attention_heads + 2 * query_groups()) * head_dim(); }
  // Rows of linear_fc1: ffn, or [gate; up] = 2 · ffn with SwiGLU.
  int64_t fc1_rows(int64_t ffn) const { return swiglu ? 2 * ffn : ffn; }

  // Fills defaults and the padded vocabulary, checks every constraint that
  // does not depend on the parallel layout; throws mt::Error naming the fix.
  void finalize(int64_t tp_size);
  // The range of every flag on its own (before defaults are filled): > 0
  // sizes, dropout in [0, 1), ...; throws mt::Error naming the Megatron flag.
  void check_flag_ranges() const;
  void check_moe_flags() const;  // part of check_flag_ranges
  void check_moe_routing_flags() const;  // part of check_moe_flags
  void check_mla_flags() const;  // part of check_flag_ranges (model/config_mla.cc)
  std::string summary() const;
};

// Every field of ModelConfig, once: JSON key, Megatron flag ("" when the
// field is not set by a model flag) and help. The command line, the
// checkpoint metadata and its validation are all generated from this list.
// `visit(key, flag, help, field)` is called with a reference to the field
// (int64_t, float, bool or std::string).
template <class Config, class Visit>
void for_each_model_field(Config& c, Visit&& visit) {
  visit("num_layers", "--num-layers", "transformer layers", c.num_layers);
  visit("hidden_size", "--hidden-size", "hidden size h", c.hidden_size);
  visit("ffn_hidden_size", "--ffn-hidden-size", "MLP hidden size (default 4h)", c.ffn_hidden_size);
  visit("num_attention_heads", "--num-attention-heads", "attention heads", c.num_attention_heads);
  visit("seq_length", "--seq-length", "sequence length", c.seq_length);
  visit("max_position_embeddings", "--max-position-embeddings",
        "positions the model can take (default seq-length)", c.max_position_embeddings);
  visit("vocab_size", "", "", c.vocab_size);
  visit("make_vocab_size_divisible_by", "--make-vocab-size-divisible-by",
        "pad the vocabulary to a multiple of this (times TP)", c.make_vocab_size_divisible_by);
  visit("padded_vocab_size", "--padded-vocab-size", "the model's vocabulary rows (default: the "
        "tokenizer's, padded by --make-vocab-size-divisible-by x TP)", c.padded_vocab_size);
  visit("init_method_std", "--init-method-std", "std of the normal weight init",
        c.init_method_std);
  visit("hidden_dropout", "--hidden-dropout", "dropout on hidden states", c.hidden_dropout);
  visit("attention_dropout", "--attention-dropout", "dropout on attention probabilities",
        c.attention_dropout);
  visit("layernorm_epsilon", "--norm-epsilon,--layernorm-epsilon", "epsilon of the norms",
        c.layernorm_epsilon);
  visit("normalization", "--normalization", "LayerNorm | RMSNorm", c.normalization);
  visit("position_embedding_type", "--position-embedding-type",
        "learned_absolute | rope | yarn | none", c.position_embedding_type);
  visit("rotary_base", "--rotary-base", "RoPE base (theta)", c.rotary_base);
  visit("rotary_percent", "--rotary-percent", "fraction of each head's features RoPE rotates",
        c.rotary_percent);
  visit("use_rope_scaling", "--use-rope-scaling",
        "Llama 3.1's scaling of the RoPE frequencies (rope_scaling llama3)", c.use_rope_scaling);
  visit("rope_scaling_factor", "--rope-scaling-factor",
        "with --use-rope-scaling: low frequencies are divided by this", c.rope_scaling_factor);
  visit("rope_scaling_low_freq_factor", "--rope-scaling-low-freq-factor",
        "with --use-rope-scaling: wavelengths above original / this are scaled fully",
        c.rope_scaling_low_freq_factor);
  visit("rope_scaling_high_freq_factor", "--rope-scaling-high-freq-factor",
        "with --use-rope-scaling: wavelengths below original / this are kept",
        c.rope_scaling_high_freq_factor);
  visit("rope_scaling_original_max_position_embeddings",
        "--rope-scaling-original-max-position-embeddings",
        "with --use-rope-scaling: the context length the model was pretrained with",
        c.rope_scaling_original_max_position_embeddings);
  visit("swiglu", "--swiglu", "gated MLP: silu(gate) * up (fc1 holds gate and up)", c.swiglu);
  visit("squared_relu", "--squared-relu", "MLP activation relu(x)^2 instead of GELU",
        c.squared_relu);
  visit("mlp_kind", "--mlp-kind", "the MLP of the dense layers: a block the program registered "
        "by this name (megatron/block.h); default: the library's own", c.mlp_kind);
  visit("apply_layernorm_1p", "--apply-layernorm-1p", "zero-centred norm weights: every norm "
        "scales by (1 + weight), weights initialised to 0", c.apply_layernorm_1p);
  visit("group_query_attention", "--group-query-attention",
        "grouped-query attention (--num-query-groups key/value heads)", c.group_query_attention);
  visit("num_query_groups", "--num-query-groups", "key/value heads with --group-query-attention",
        c.num_query_groups);
  visit("disable_bias_linear", "--disable-bias-linear", "no biases in the linear layers",
        c.disable_bias_linear);
  visit("kv_channels", "--kv-channels",
        "attention head size (default hidden-size / num-attention-heads)", c.kv_channels);
  visit("qk_layernorm", "--qk-layernorm",
        "a norm (--normalization) over each head's query and key, before RoPE (with "
        "--multi-latent-attention: over the q and kv latents)", c.qk_layernorm);
  visit("add_qkv_bias", "--add-qkv-bias", "a bias on the QKV projection, even with "
        "--disable-bias-linear", c.add_qkv_bias);
  visit("window_size", "--window-size",
        "sliding-window attention L,0: each query sees itself and the L keys before it "
        "(-1,0 or left out: the whole causal context)", c.window_size);
  visit("untie_embeddings_and_output_weights", "--untie-embeddings-and-output-weights",
        "the output layer is its own parameter, not the word embedding",
        c.untie_embeddings_and_output_weights);
  visit("multi_latent_attention", "--multi-latent-attention",
        "multi-latent attention (DeepSeek-V2/V3): q and kv from low-rank latents",
        c.multi_latent_attention);
  visit("q_lora_rank", "--q-lora-rank",
        "MLA: rank of the query latent (left out: a plain q projection)", c.q_lora_rank);
  visit("kv_lora_rank", "--kv-lora-rank", "MLA: rank of the key/value latent (default 32)",
        c.kv_lora_rank);
  visit("qk_head_dim", "--qk-head-dim", "MLA: a head's q/k size without RoPE (default 128)",
        c.qk_head_dim);
  visit("qk_pos_emb_head_dim", "--qk-pos-emb-head-dim",
        "MLA: a head's q/k size with RoPE, the key's shared by the heads (default 64)",
        c.qk_pos_emb_head_dim);
  visit("v_head_dim", "--v-head-dim", "MLA: a head's value size (default 128)", c.v_head_dim);
  visit("rope_type", "--rope-type", "rope | yarn: MLA's RoPE (default yarn)", c.rope_type);
  visit("rotary_scaling_factor", "--rotary-scaling-factor",
        "YaRN: the context extension factor (default 1: no scaling)", c.rotary_scaling_factor);
  visit("mscale", "--mscale", "YaRN: mscale (default 1)", c.mscale);
  visit("mscale_all_dim", "--mscale-all-dim", "YaRN: mscale_all_dim (default 0)",
        c.mscale_all_dim);
  visit("yarn_original_max_position_embeddings", "--yarn-original-max-position-embeddings",
        "YaRN: the context length the model was pretrained with (default 4096)",
        c.yarn_original_max_position_embeddings);
  visit("yarn_beta_fast", "--yarn-beta-fast", "YaRN: beta_fast (default 32)", c.yarn_beta_fast);
  visit("yarn_beta_slow", "--yarn-beta-slow", "YaRN: beta_slow (default 1)", c.yarn_beta_slow);
  visit("num_experts", "--num-experts", "experts of each MoE layer (0: dense MLPs)", c.num_experts);
  visit("moe_ffn_hidden_size", "--moe-ffn-hidden-size", "an expert's MLP hidden size (default ffn)",
        c.moe_ffn_hidden_size);
  visit("moe_layer_freq", "--moe-layer-freq",
        "N: every N-th layer is MoE; or a per-layer list such as [0,1,1,1] or [0]*1+[1]*3",
        c.moe_layer_freq);
  visit("moe_shared_expert_intermediate_size", "--moe-shared-expert-intermediate-size",
        "hidden size of a dense shared expert every token visits (0: none)",
        c.moe_shared_expert_intermediate_size);
  visit("moe_router_topk", "--moe-router-topk", "experts each token is routed to",
        c.moe_router_topk);
  visit("moe_router_pre_softmax", "--moe-router-pre-softmax",
        "softmax over all experts before the top-k (default: top-k, then softmax over k)",
        c.moe_router_pre_softmax);
  visit("moe_router_dtype", "--moe-router-dtype",
        "fp32: router logits, softmax and top-k in fp32 in a bf16 run (default: the run's "
        "dtype)", c.moe_router_dtype);
  visit("moe_router_score_function", "--moe-router-score-function",
        "softmax | sigmoid: the router's scores (sigmoid: DeepSeek-V3)",
        c.moe_router_score_function);
  visit("moe_router_topk_scaling_factor", "--moe-router-topk-scaling-factor",
        "the chosen experts' weights times this factor (default: none)",
        c.moe_router_topk_scaling_factor);
  visit("moe_router_num_groups", "--moe-router-num-groups",
        "group-limited routing: the experts in this many equal groups", c.moe_router_num_groups);
  visit("moe_router_group_topk", "--moe-router-group-topk",
        "group-limited routing: the groups each token chooses its experts from",
        c.moe_router_group_topk);
  visit("moe_router_enable_expert_bias", "--moe-router-enable-expert-bias",
        "aux-loss-free balancing: a per-expert bias on the sigmoid scores, for the choice only",
        c.moe_router_enable_expert_bias);
  visit("moe_router_bias_update_rate", "--moe-router-bias-update-rate",
        "the expert bias's step per iteration (default 1e-3)", c.moe_router_bias_update_rate);
  visit("moe_router_load_balancing_type", "--moe-router-load-balancing-type",
        "aux_loss | seq_aux_loss | none", c.moe_router_load_balancing_type);
  visit("moe_aux_loss_coeff", "--moe-aux-loss-coeff", "load-balancing loss coefficient",
        c.moe_aux_loss_coeff);
  visit("moe_z_loss_coeff", "--moe-z-loss-coeff", "router z-loss coefficient (0: none)",
        c.moe_z_loss_coeff);
  visit("moe_expert_capacity_factor", "--moe-expert-capacity-factor",
        "each expert takes at most factor x tokens x topk / experts (absent: dropless)",
        c.moe_expert_capacity_factor);
  visit("moe_token_drop_policy", "--moe-token-drop-policy",
        "probs | position: which tokens an expert over capacity drops", c.moe_token_drop_policy);
  visit("moe_pad_expert_input_to_capacity", "--moe-pad-expert-input-to-capacity",
        "pad every expert's input to its capacity", c.moe_pad_expert_input_to_capacity);
  visit("moe_token_dispatcher_type", "--moe-token-dispatcher-type", "allgather | alltoall",
        c.moe_token_dispatcher_type);
  visit("moe_grouped_gemm", "--moe-grouped-gemm",
        "a rank's local experts as one grouped product", c.moe_grouped_gemm);
  visit("mtp_num_layers", "--mtp-num-layers",
        "multi-token prediction depths on the last stage (DeepSeek-V3; default none)",
        c.mtp_num_layers);
  visit("mtp_loss_scaling_factor", "--mtp-loss-scaling-factor",
        "the MTP loss (mean over the depths) times this is added to the loss (default 0.1)",
        c.mtp_loss_scaling_factor);
}

// The architecture `c` describes, each field in one spelling: --ffn-hidden-size
// and --max-position-embeddings resolved, --moe-ffn-hidden-size resolved and
// --moe-layer-freq as its per-layer list ("1" and "[1,1]" alike), the MoE
// fields of a dense model at their defaults, and the query groups as their
// number (the heads without GQA; the switch off). Two configurations of one
// model compare equal. For comparison only: not a configuration to run.
ModelConfig resolved_architecture(ModelConfig c);

// The model fields that are not architecture (a checkpoint may be resumed
// with other values): dropout, init, sequence length, vocabulary padding,
// and the MoE training knobs.
bool is_training_knob(const std::string& key);

// Megatron's _vocab_size_with_padding: round up to a multiple of
// make_vocab_size_divisible_by * tp_size.
int64_t padded_vocab_size(int64_t vocab_size, int64_t divisible_by, int64_t tp_size);

// Parameters of one multi-latent attention block (model/config_mla.cc).
int64_t mla_attention_parameters(const ModelConfig& c);

// Parameters in the whole model (all stages, unsharded); throws mt::Error
// naming the flags if the count overflows int64.
int64_t count_parameters(const ModelConfig& c);
// The same without the word embedding and output layer, with ffn hidden size
// `ffn` (usable before finalize(): positions counted as
// max(max_position_embeddings, seq)).
int64_t parameters_without_vocab(const ModelConfig& c, int64_t ffn);

}  // namespace mt
