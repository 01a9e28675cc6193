#include "flags/model_flags.h"

#include <string_view>

#include "flags/field_flags.h"
#include "core/error.h"

namespace mt {

namespace {

// A field whose 0 means "left out" (the default derived): given, it must be > 0.
CLI::Validator positive_or_left_out(std::string flag, std::string fix) {
  return CLI::Validator(
      [flag, fix](std::string& v) -> std::string {
        if (!v.empty() && v != "0" && v.front() != '-') return "";
        return flag + " " + v + " must be > 0; fix: " + fix;
      },
      "> 0");
}

}  // namespace

std::vector<std::pair<std::string, CLI::Option*>> add_model_flags(CLI::Option_group& group,
                                                                  ModelConfig& m) {
  std::vector<std::pair<std::string, CLI::Option*>> options;
  for_each_model_field(m, [&](const char* key, const char* flag, const char* help, auto& field) {
    if (*flag == '\0') return;  // set from the tokenizer or derived
    options.push_back({key, add_field_flag(group, flag, help, field)});
    if (std::string_view(key) == "kv_channels")
      options.back().second->check(positive_or_left_out(
          flag, "give the head size, or leave the flag out for hidden-size / "
                "num-attention-heads"));
    if (std::string_view(key) == "padded_vocab_size")
      options.back().second->check(positive_or_left_out(
          flag, "give the model's vocabulary rows, or leave the flag out to pad the tokenizer's "
                "by --make-vocab-size-divisible-by x TP"));
  });
  // Megatron-LM's deprecated spellings, as its validate_args reads them:
  // --use-rotary-position-embeddings makes the type rope whatever
  // --position-embedding-type says; --no-position-embedding is taken only when
  // the type is then rope (where it changes nothing) and refused otherwise.
  // CLI11 runs the callbacks in the order registered: after --position-embedding-type.
  options.push_back(
      {"position_embedding_type",
       group.add_flag_callback(
           "--use-rotary-position-embeddings", [&m] { m.position_embedding_type = "rope"; },
           "deprecated spelling of --position-embedding-type rope (Megatron-LM's; it wins over "
           "that flag)")});
  group.add_flag_callback(
      "--no-position-embedding",
      [&m] {
        MT_CHECK(m.rope(), "--no-position-embedding is deprecated, use "
                 "--position-embedding-type (Megatron-LM refuses it unless the type is rope); "
                 "fix: --position-embedding-type none for no position embedding, or add "
                 "--position-embedding-type rope");
      },
      "deprecated (Megatron-LM's): accepted only with rope, where it changes nothing; use "
      "--position-embedding-type none");
  return options;
}

}  // namespace mt
