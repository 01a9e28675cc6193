#include "train/run_record.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "args/resume_options.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_io.h"
#include "checkpoint/checkpoint_tokenizer.h"
#include "core/error.h"
#include "core/log.h"
#include "train/run_tokenizer.h"

namespace mt {

nlohmann::json resolve_run_args(TrainArgs& args, int64_t loaded_iteration,
                                const ParallelState& ps) {
  nlohmann::json run_args = {
      {"tokenizer", resolve_tokenizer(args, loaded_iteration, ps.world_rank == 0)}};
  const std::vector<std::string> prefixes = args.dataset_prefixes();
  const std::string unrecorded = check_blend_tokenizers(prefixes);
  if (!unrecorded.empty()) log_line(ps.world_rank == 0, "warning: %s\n", unrecorded.c_str());
  for (const std::string& prefix : prefixes)
    check_dataset_tokenizer(prefix, run_args["tokenizer"], args.vocab_file);
  const int64_t given_padded = args.model.padded_vocab_size;  // --padded-vocab-size (0: none)
  args.model.finalize(ps.tp_size);
  if (loaded_iteration >= 0) {  // keep the checkpoint's vocabulary padding when this TP size divides it
    const nlohmann::json saved_args = read_checkpoint_meta(args.load).at("args");
    const int64_t saved = saved_args.at("model").at("padded_vocab_size");
    // Megatron's check_checkpoint_args compares padded_vocab_size too.
    MT_CHECK(given_padded == 0 || given_padded == saved, "--padded-vocab-size ", given_padded,
             " differs from the checkpoint's ", saved, " vocabulary rows (--load ", args.load,
             "); fix: pass --padded-vocab-size ", saved, ", or leave it out");
    if (saved % ps.tp_size == 0 && saved >= args.model.vocab_size)
      args.model.padded_vocab_size = saved;
    // Where a converted model came from (its Hugging Face vocab_size: what an export writes back).
    if (saved_args.contains("converted_from"))
      run_args["converted_from"] = saved_args.at("converted_from");
  }
  run_args["model"] = model_config_to_json(args.model);
  run_args["seed"] = args.seed;
  const nlohmann::json training = training_options_record(args);
  if (!training.empty()) run_args["training"] = training;
  // Which pipeline rank holds each layer, for re-sharding on load.
  std::vector<int> layer_stage(size_t(args.model.num_layers), 0);
  for (int r = 0; r < ps.pp_size; ++r)
    for (const auto& [b, e] : args.stage_layout(0, 1, r, ps.pp_size).chunk_ranges())
      for (int64_t l = b; l < e; ++l) layer_stage[size_t(l)] = r;
  run_args["layer_stage"] = layer_stage;
  return run_args;
}

// Megatron's --use-checkpoint-args: every model field the command line does
// not give comes from the checkpoint being loaded (its vocabulary from its
// tokenizer, as always); the ones it gives must then agree with it where
// they are architecture (check_same_architecture, at load).
void adopt_checkpoint_model(TrainArgs& args) {
  MT_CHECK(!args.load.empty() && latest_iteration(args.load) >= 0,
           "--use-checkpoint-args needs a checkpoint to read them from; fix: pass --load DIR of "
           "a checkpoint (", args.load.empty() ? "none given" : args.load + " has none", ")");
  const nlohmann::json saved = read_checkpoint_meta(args.load).at("args").at("model");
  const ModelConfig from = model_config_from_json(saved);
  ModelConfig& to = args.model;
  auto given = [&](const std::string& key) {
    return std::find(args.model_flags_given.begin(), args.model_flags_given.end(), key) !=
           args.model_flags_given.end();
  };
  for_each_model_field(to, [&](const char* key, const char* flag, const char*, auto& field) {
    if (*flag == '\0' || given(key) || !saved.contains(key)) return;
    for_each_model_field(from, [&](const char* k, const char*, const char*, const auto& value) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::decay_t<decltype(field)>>)
        if (std::string_view(k) == key) field = value;
    });
  });
}

}  // namespace mt
