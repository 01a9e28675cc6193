// megatron/config.h — a model's configuration as a library value, the named
// sizes `megatron config` offers, and `megatron config` itself.
//
// ModelConfig holds what a user sets of the transformer: its sizes (layers,
// hidden, heads, query groups, ffn, vocabulary, sequence), the kind of norm,
// position embedding and MLP activation, biases, the tied output layer,
// multi-latent attention, the experts of an MoE model and multi-token
// prediction. Each field is named as Megatron-LM's flag (`--num-layers` is
// num_layers) and defaults as `megatron train` does, so a ModelConfig{} with
// a few sizes set is the model those flags give.
//
// The named sizes (gpt2-small ... mixtral-8x7b) are the published Hugging
// Face config.json of each model read by the converter's own reader: a named
// size is exactly the model `megatron convert` makes of that checkpoint.
//
//   megatron::ModelConfig m = megatron::named_model("llama3-8b");
//   m.seq_length = 4096;
//   megatron::check_model_config(m);  // throws ConfigError naming the flag to fix
//   // megatron/plan.h: the layouts of m on a cluster, fastest first
#pragma once
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "megatron/flags.h"

namespace megatron {

// A configuration the library refuses (a model, a cluster, a layout): what()
// names the field as its Megatron flag, the values and the fix.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ModelConfig {
  // Sizes.
  int64_t num_layers = 4;
  int64_t hidden_size = 128;
  int64_t ffn_hidden_size = 0;          // 0: 4 * hidden_size
  int64_t num_attention_heads = 4;
  bool group_query_attention = false;   // key/value heads: num_query_groups (else one per head)
  int64_t num_query_groups = 1;
  int64_t kv_channels = 0;              // head size (0: hidden_size / num_attention_heads)
  int64_t seq_length = 64;
  int64_t max_position_embeddings = 0;  // 0: seq_length
  int64_t vocab_size = 0;               // the tokenizer's (padded by the next two)
  int64_t make_vocab_size_divisible_by = 128;  // times TP
  int64_t padded_vocab_size = 0;        // the model's vocabulary rows (0: vocab_size padded)
  // Kinds.
  std::string normalization = "LayerNorm";                   // LayerNorm | RMSNorm
  float layernorm_epsilon = 1e-5f;                           // --norm-epsilon
  bool apply_layernorm_1p = false;                           // norms scale by (1 + weight)
  bool qk_layernorm = false;                                 // a norm over each head's q and k
  std::string position_embedding_type = "learned_absolute";  // learned_absolute | rope | yarn | none
  float rotary_base = 10000.f;
  float rotary_percent = 1.f;
  bool use_rope_scaling = false;  // Llama 3.1's frequency scaling, with the four below
  float rope_scaling_factor = 8.f;
  float rope_scaling_low_freq_factor = 1.f;
  float rope_scaling_high_freq_factor = 4.f;
  int64_t rope_scaling_original_max_position_embeddings = 8192;
  bool swiglu = false;        // the MLP's activation: SwiGLU (gated) ...
  bool squared_relu = false;  // ... or relu(x)^2; neither: GELU
  std::string mlp_kind;       // a block registered by name (megatron/block.h); "": the library's
  bool disable_bias_linear = false;  // no biases in the linear layers
  bool add_qkv_bias = false;         // a bias on the QKV projection even so
  std::string window_size;           // sliding-window attention "L,0" ("": none)
  bool untie_embeddings_and_output_weights = false;
  // Training settings of the model.
  float init_method_std = 0.02f;
  float hidden_dropout = 0.1f;
  float attention_dropout = 0.1f;
  // Multi-latent attention (DeepSeek-V2/V3).
  bool multi_latent_attention = false;
  int64_t q_lora_rank = 0;  // 0: a plain q projection
  int64_t kv_lora_rank = 32;
  int64_t qk_head_dim = 128;
  int64_t qk_pos_emb_head_dim = 64;
  int64_t v_head_dim = 128;
  std::string rope_type;  // MLA's: "" (yarn) | rope | yarn
  // YaRN (MLA's, or --position-embedding-type yarn).
  float rotary_scaling_factor = 1.f;
  float mscale = 1.f;
  float mscale_all_dim = 0.f;
  int64_t yarn_original_max_position_embeddings = 4096;
  float yarn_beta_fast = 32.f;
  float yarn_beta_slow = 1.f;
  // Mixture of experts (num_experts 0: every MLP dense).
  int64_t num_experts = 0;
  int64_t moe_ffn_hidden_size = 0;   // an expert's (0: ffn_hidden_size)
  std::string moe_layer_freq = "1";  // every N-th layer, or a list "[0,1,1,1]"
  int64_t moe_shared_expert_intermediate_size = 0;  // 0: no shared expert
  int64_t moe_router_topk = 2;
  bool moe_router_pre_softmax = false;
  std::string moe_router_dtype;                       // "" (the run's) | fp32
  std::string moe_router_score_function = "softmax";  // softmax | sigmoid
  float moe_router_topk_scaling_factor = 0.f;         // 0: none
  int64_t moe_router_num_groups = 0;
  int64_t moe_router_group_topk = 0;
  bool moe_router_enable_expert_bias = false;
  float moe_router_bias_update_rate = 1e-3f;
  std::string moe_router_load_balancing_type = "aux_loss";  // aux_loss | seq_aux_loss | none
  float moe_aux_loss_coeff = 0.f;
  float moe_z_loss_coeff = 0.f;
  float moe_expert_capacity_factor = -1.f;  // < 0: dropless
  std::string moe_token_drop_policy = "probs";  // probs | position
  bool moe_pad_expert_input_to_capacity = false;
  std::string moe_token_dispatcher_type = "allgather";  // allgather | alltoall
  bool moe_grouped_gemm = false;
  // Multi-token prediction (DeepSeek-V3): depths on the last stage (0: none).
  int64_t mtp_num_layers = 0;
  float mtp_loss_scaling_factor = 0.1f;
};

// Throws ConfigError when `m` cannot be trained (on one tensor-parallel
// rank): a size out of range, heads not dividing the hidden size, experts
// without top-k, ...; the message names the flag and the fix, as `megatron
// train` says it.
void check_model_config(const ModelConfig& m);

// Parameters of the whole model (every stage, unsharded; the vocabulary
// padded for one TP rank). Throws ConfigError as check_model_config.
int64_t count_parameters(const ModelConfig& m);

// A named size: its name and the Hugging Face repository whose config.json it is.
struct NamedModel {
  std::string name;    // "llama3-8b"
  std::string source;  // "meta-llama/Meta-Llama-3-8B"
};

// Every named size, in the order `megatron config` offers them.
std::vector<NamedModel> named_models();

// The named size `name` (as named_models() spells it): vocab_size its
// tokenizer's rows, seq_length its context (max_position_embeddings), dropout
// 0, as `megatron convert` gives the model. Throws ConfigError naming the sizes.
ModelConfig named_model(const std::string& name);

// `megatron config`: questions (the device and the cluster, the model, the
// sequence and batch, the layout: one of the fastest `megatron plan` finds,
// or the sizes by hand), then a TOML file that `megatron train --config` and
// `megatron plan --config` read.
struct ConfigOptions {
  ConfigOptions() {}  // set the fields by name (so that ConfigQuestions({"--yes"}) is the words)
  std::string output = "megatron_config.toml";  // replaced only when told (force, or asked)
  std::string answers;  // a file of `key = value` answers (a key left out takes its default)
  bool yes = false;     // every default, nothing asked
  bool force = false;   // replace `output` if it exists
};

class ConfigQuestions {
 public:
  explicit ConfigQuestions(ConfigOptions options);
  // `words`: the arguments after `megatron config`. Throws FlagError
  // (megatron/flags.h; FlagHelp for --help, what() the usage).
  explicit ConfigQuestions(const std::vector<std::string>& words);
  ~ConfigQuestions();
  ConfigQuestions(const ConfigQuestions&) = delete;
  ConfigQuestions& operator=(const ConfigQuestions&) = delete;

  // Asks on `out` and reads the answers from `in` (std::cin / std::cout for
  // run()); writes the file and returns 0. An answer refused is asked again
  // at a terminal; with `yes` or `answers`, or the input ending early, the
  // whole program ends as the binary does (one line naming the question and
  // the fix, exit 1, nothing written).
  int run(std::istream& in, std::ostream& out);
  int run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace megatron
