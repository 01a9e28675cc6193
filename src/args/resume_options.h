// The training options a checkpoint records beyond the model and tokenizer
// (meta.json's args.training): those that change what an iteration computes
// — --rampup-batch-size and --step-batch-size-schedule (each iteration's
// batch and samples). A resume with
// other values is refused, naming the flag and both values; a checkpoint
// without the record was saved without them. The document flags and
// --calculate-per-token-loss are recorded only (a resume may change them, as
// in Megatron).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "args/args.h"

namespace mt {

// The record (an object; empty when every option has its default).
nlohmann::json training_options_record(const TrainArgs& args);

// Throws mt::Error where `saved_args` (a checkpoint's args) records other
// options than `args` gives.
void check_training_options_on_resume(const nlohmann::json& saved_args, const TrainArgs& args,
                                      const std::string& load_dir);

}  // namespace mt
