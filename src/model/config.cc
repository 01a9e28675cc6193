#include "model/config.h"

#include <sstream>

#include "core/error.h"

namespace mt {

int64_t padded_vocab_size(int64_t vocab_size, int64_t divisible_by, int64_t tp_size) {
  MT_CHECK(divisible_by > 0, "--make-vocab-size-divisible-by ", divisible_by, " must be > 0");
  const int64_t multiple = divisible_by * tp_size;
  return (vocab_size + multiple - 1) / multiple * multiple;
}

void ModelConfig::finalize(int64_t tp_size) {
  if (ffn_hidden_size == 0) ffn_hidden_size = 4 * hidden_size;
  if (max_position_embeddings == 0) max_position_embeddings = seq_length;
  MT_CHECK(num_layers > 0, "--num-layers ", num_layers, " must be > 0");
  MT_CHECK(hidden_size > 0 && num_attention_heads > 0, "--hidden-size ", hidden_size,
           " and --num-attention-heads ", num_attention_heads, " must be > 0");
  MT_CHECK(hidden_size % num_attention_heads == 0, "--hidden-size ", hidden_size,
           " is not divisible by --num-attention-heads ", num_attention_heads,
           "; fix: choose heads that divide the hidden size");
  MT_CHECK(seq_length > 0, "--seq-length ", seq_length, " must be > 0");
  MT_CHECK(max_position_embeddings >= seq_length, "--max-position-embeddings ",
           max_position_embeddings, " is smaller than --seq-length ", seq_length,
           "; fix: raise --max-position-embeddings");
  MT_CHECK(vocab_size > 0, "vocabulary size ", vocab_size,
           " must be > 0; fix: pass --vocab-file or --vocab-size");
  MT_CHECK(hidden_dropout >= 0 && hidden_dropout < 1, "--hidden-dropout ", hidden_dropout,
           " must be in [0, 1)");
  MT_CHECK(attention_dropout >= 0 && attention_dropout < 1, "--attention-dropout ",
           attention_dropout, " must be in [0, 1)");
  MT_CHECK(init_method_std > 0, "--init-method-std ", init_method_std, " must be > 0");
  padded_vocab_size = mt::padded_vocab_size(vocab_size, make_vocab_size_divisible_by, tp_size);
}

std::string ModelConfig::summary() const {
  std::ostringstream os;
  os << "layers " << num_layers << ", hidden " << hidden_size << ", heads "
     << num_attention_heads << ", ffn " << ffn_hidden_size << ", seq " << seq_length
     << ", vocab " << vocab_size << " (padded " << padded_vocab_size << ")";
  return os.str();
}

int64_t count_parameters(const ModelConfig& c) {
  const int64_t h = c.hidden_size, f = c.ffn_hidden_size;
  const int64_t per_layer = 2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (f * h + f) +
                            (h * f + h);
  return c.padded_vocab_size * h + c.max_position_embeddings * h + c.num_layers * per_layer +
         2 * h;
}

}  // namespace mt
