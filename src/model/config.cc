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
     << num_attention_heads << ", ffn " << ffn_hidden_size << ", seq " << seq_length
     << ", vocab " << vocab_size << " (padded " << padded_vocab_size << ")";
  return os.str();
}

int64_t parameters_without_vocab(const ModelConfig& c, int64_t ffn) {
  constexpr std::string_view what =
      "parameter count (--num-layers, --hidden-size, --ffn-hidden-size, "
      "--max-position-embeddings)";
  const int64_t h = c.hidden_size, f = ffn;
  const int64_t hh = checked_mul(h, h, what), fh = checked_mul(f, h, what);
  // 2h (norm) + 3h² + 3h (QKV) + h² + h (proj) + 2h (norm) + fh + f (fc1) + hf + h (fc2)
  int64_t per_layer = checked_mul(4, hh, what);
  per_layer = checked_add(per_layer, checked_mul(2, fh, what), what);
  per_layer = checked_add(per_layer, checked_add(checked_mul(9, h, what), f, what), what);
  const int64_t positions = std::max(c.max_position_embeddings, c.seq_length);
  return checked_add(checked_add(checked_mul(c.num_layers, per_layer, what),
                                 checked_mul(positions, h, what), what),
                     checked_mul(2, h, what), what);
}

int64_t count_parameters(const ModelConfig& c) {
  const int64_t embedding = checked_mul(c.padded_vocab_size, c.hidden_size,
                                        "parameters of the word embedding (vocabulary x "
                                        "--hidden-size)");
  return checked_add(parameters_without_vocab(c, c.ffn_hidden_size), embedding,
                     "parameter count");
}

}  // namespace mt
