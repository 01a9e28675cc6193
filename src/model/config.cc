#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/checked_math.h"

#include "core/error.h"

namespace mt {

int64_t padded_vocab_size(int64_t vocab_size, int64_t divisible_by, int64_t tp_size) {
  MT_CHECK(divisible_by > 0, "--make-vocab-size-divisible-by ", divisible_by, " must be > 0");
  const int64_t multiple =
      checked_mul(divisible_by, tp_size, "--make-vocab-size-divisible-by x TP");
  const int64_t padded = checked_add(vocab_size, multiple - 1,
                                   "the padded vocabulary size (--make-vocab-size-divisible-by)");
  return padded / multiple * multiple;
}

void ModelConfig::check_flag_ranges() const {
  MT_CHECK(num_layers > 0, "--num-layers ", num_layers, " must be > 0");
  MT_CHECK(hidden_size > 0, "--hidden-size ", hidden_size, " must be > 0");
  MT_CHECK(ffn_hidden_size >= 0, "--ffn-hidden-size ", ffn_hidden_size,
           " must be > 0; fix: give a positive size, or leave it out for 4 x --hidden-size");
  MT_CHECK(num_attention_heads > 0, "--num-attention-heads ", num_attention_heads,
           " must be > 0");
  MT_CHECK(hidden_size % num_attention_heads == 0, "--hidden-size ", hidden_size,
           " is not divisible by --num-attention-heads ", num_attention_heads,
           "; fix: choose heads that divide the hidden size");
  MT_CHECK(seq_length > 0, "--seq-length ", seq_length, " must be > 0");
  MT_CHECK(max_position_embeddings >= 0, "--max-position-embeddings ", max_position_embeddings,
           " must be > 0; fix: give at least --seq-length, or leave it out");
  MT_CHECK(max_position_embeddings == 0 || max_position_embeddings >= seq_length,
           "--max-position-embeddings ", max_position_embeddings, " is smaller than --seq-length ",
           seq_length, "; fix: raise --max-position-embeddings");
  MT_CHECK(make_vocab_size_divisible_by > 0, "--make-vocab-size-divisible-by ",
           make_vocab_size_divisible_by, " must be > 0 (e.g. 128)");
  MT_CHECK(std::isfinite(init_method_std) && init_method_std > 0, "--init-method-std ",
           init_method_std, " must be a finite number > 0 (e.g. 0.02)");
  MT_CHECK(hidden_dropout >= 0 && hidden_dropout < 1, "--hidden-dropout ", hidden_dropout,
           " must be in [0, 1)");
  MT_CHECK(attention_dropout >= 0 && attention_dropout < 1, "--attention-dropout ",
           attention_dropout, " must be in [0, 1)");
  MT_CHECK(std::isfinite(layernorm_epsilon) && layernorm_epsilon > 0, "--layernorm-epsilon ",
           layernorm_epsilon, " must be a finite number > 0 (e.g. 1e-5)");
  MT_CHECK(normalization == "LayerNorm" || normalization == "RMSNorm", "--normalization '",
           normalization, "' is not one of LayerNorm, RMSNorm");
  MT_CHECK(position_embedding_type == "learned_absolute" || position_embedding_type == "rope" ||
               position_embedding_type == "none",
           "--position-embedding-type '", position_embedding_type,
           "' is not one of learned_absolute, rope, none");
  MT_CHECK(std::isfinite(rotary_base) && rotary_base > 1, "--rotary-base ", rotary_base,
           " must be a finite number > 1 (e.g. 10000)");
  MT_CHECK(std::isfinite(rotary_percent) && rotary_percent > 0 && rotary_percent <= 1,
           "--rotary-percent ", rotary_percent, " must be in (0, 1]");
  if (rope()) {
    const int64_t rot = int64_t(float(head_dim()) * rotary_percent);
    MT_CHECK(rot >= 2 && rot % 2 == 0, "--rotary-percent ", rotary_percent, " of head dim ",
             head_dim(), " rotates ", rot,
             " features; RoPE needs an even number >= 2; fix: choose --rotary-percent so that "
             "head_dim x percent is even");
  }
  MT_CHECK(num_query_groups > 0, "--num-query-groups ", num_query_groups, " must be > 0");
  MT_CHECK(!group_query_attention || num_attention_heads % num_query_groups == 0,
           "--num-attention-heads ", num_attention_heads, " is not divisible by --num-query-groups ",
           num_query_groups, "; fix: choose groups that divide the heads");
  const int64_t ffn = ffn_hidden_size > 0
                          ? ffn_hidden_size
                          : checked_mul(4, hidden_size, "the default --ffn-hidden-size (4 x "
                                                        "--hidden-size)");
  parameters_without_vocab(*this, ffn);  // throws if the parameter count overflows
}

void ModelConfig::finalize(int64_t tp_size) {
  check_flag_ranges();
  if (ffn_hidden_size == 0) ffn_hidden_size = 4 * hidden_size;
  if (max_position_embeddings == 0) max_position_embeddings = seq_length;
  MT_CHECK(vocab_size > 0, "vocabulary size ", vocab_size,
           " must be > 0; fix: pass --vocab-file or --vocab-size");
  padded_vocab_size = mt::padded_vocab_size(vocab_size, make_vocab_size_divisible_by, tp_size);
  count_parameters(*this);  // throws if it overflows
}

std::string ModelConfig::summary() const {
  std::ostringstream os;
  os << "layers " << num_layers << ", hidden " << hidden_size << ", heads "
     << num_attention_heads;
  if (group_query_attention) os << " (" << num_query_groups << " query groups)";
  os << ", ffn " << ffn_hidden_size << (swiglu ? " SwiGLU" : "") << ", seq " << seq_length
     << ", vocab " << vocab_size << " (padded " << padded_vocab_size << ")";
  if (rms_norm() || !learned_positions() || disable_bias_linear || !tied_output())
    os << ", " << normalization << ", positions " << position_embedding_type
       << (disable_bias_linear ? ", no linear biases" : "")
       << (tied_output() ? "" : ", untied output layer");
  return os.str();
}

int64_t parameters_without_vocab(const ModelConfig& c, int64_t ffn) {
  constexpr std::string_view what =
      "parameter count (--num-layers, --hidden-size, --ffn-hidden-size, "
      "--max-position-embeddings)";
  const int64_t h = c.hidden_size, qkv = c.qkv_rows(), fc1 = c.fc1_rows(ffn);
  const int64_t norm = c.rms_norm() ? h : 2 * h;  // weight (and bias)
  // Weights: QKV (qkv x h), projection (h x h), fc1 (fc1 x h), fc2 (h x ffn);
  // biases of the same four; two norms.
  const int64_t rows = checked_add(checked_add(qkv, h, what), checked_add(fc1, ffn, what), what);
  int64_t per_layer = checked_mul(rows, h, what);  // fc2 (h x ffn) counted as ffn rows of h
  if (c.add_bias()) per_layer = checked_add(per_layer, qkv + h + fc1 + h, what);
  per_layer = checked_add(per_layer, 2 * norm, what);
  const int64_t positions =
      c.learned_positions() ? std::max(c.max_position_embeddings, c.seq_length) : 0;
  return checked_add(checked_add(checked_mul(c.num_layers, per_layer, what),
                                 checked_mul(positions, h, what), what),
                     norm, what);
}

int64_t count_parameters(const ModelConfig& c) {
  const int64_t embedding = checked_mul(c.padded_vocab_size, c.hidden_size,
                                        "parameters of the word embedding (vocabulary x "
                                        "--hidden-size)");
  const int64_t vocab = c.tied_output() ? embedding : checked_mul(2, embedding, "parameter count");
  return checked_add(parameters_without_vocab(c, c.ffn_hidden_size), vocab, "parameter count");
}

}  // namespace mt
