// ModelConfig: the GPT-2 architecture knobs, named as Megatron-LM's flags.
#pragma once
#include <cstdint>
#include <string>

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
  int64_t padded_vocab_size = 0;  // set by finalize()
  float init_method_std = 0.02f;
  float hidden_dropout = 0.1f;
  float attention_dropout = 0.1f;
  float layernorm_epsilon = 1e-5f;

  int64_t head_dim() const { return hidden_size / num_attention_heads; }
  // Fills defaults and the padded vocabulary, checks every constraint that
  // does not depend on the parallel layout; throws mt::Error naming the fix.
  void finalize(int64_t tp_size);
  // The range of every flag on its own (before defaults are filled): > 0
  // sizes, dropout in [0, 1), ...; throws mt::Error naming the Megatron flag.
  void check_flag_ranges() const;
  std::string summary() const;
};

// Megatron's _vocab_size_with_padding: round up to a multiple of
// make_vocab_size_divisible_by * tp_size.
int64_t padded_vocab_size(int64_t vocab_size, int64_t divisible_by, int64_t tp_size);

// Parameters in the whole model (all stages, unsharded); throws mt::Error
// naming the flags if the count overflows int64.
int64_t count_parameters(const ModelConfig& c);
// The same without the word embedding, with ffn hidden size `ffn` (usable
// before finalize(): positions counted as max(max_position_embeddings, seq)).
int64_t parameters_without_vocab(const ModelConfig& c, int64_t ffn);

}  // namespace mt
