// The named model sizes `megatron config` offers (gpt2-small ... mixtral-8x7b):
// each is the architecture part of the model's published Hugging Face
// config.json, read by the converter's own reader (convert/hf_config.h), so a
// named size gets exactly the flags `megatron convert` gives that model.
#pragma once
#include <string>
#include <vector>

#include "model/config.h"

namespace mt {

struct NamedModel {
  const char* name;     // "llama3-8b"
  const char* source;   // the Hugging Face repository whose config.json this is
  const char* config;   // its architecture keys, as JSON
};

// Every named size, in the order offered.
const std::vector<NamedModel>& named_models();

// The named size `name` (exact), or nullptr.
const NamedModel* find_named_model(const std::string& name);

// The ModelConfig of a named size (vocab_size its tokenizer's rows,
// seq_length its max_position_embeddings, dropout 0: converted models' settings).
ModelConfig named_model_config(const NamedModel& m);

// The sequence length offered by default: the model's context up to 4096.
int64_t default_seq_length(const ModelConfig& m);

}  // namespace mt
