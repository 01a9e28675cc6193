// The run's tokenizer: its record (checkpoint/checkpoint_tokenizer.h), saved in
// every checkpoint's meta.json. Resuming without tokenizer flags adopts the
// checkpoint's; with flags, they must name the checkpoint's tokenizer (other
// ids would mean other text). Sets the model's vocabulary and the tokenizer's
// end-of-document id (--mock-data's documents end with it; the document flags
// find documents by it, and are refused without one).
#pragma once
#include <cstdint>

#include <nlohmann/json.hpp>

#include "args/args.h"

namespace mt {

nlohmann::json resolve_tokenizer(TrainArgs& args, int64_t loaded_iteration, bool rank0);

}  // namespace mt
