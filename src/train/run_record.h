// The run's record of itself (meta.json's "args": what a resume, `generate`
// and `serve` read), and --use-checkpoint-args's reading of a checkpoint's
// model flags into the run's.
#pragma once
#include <cstdint>

#include <nlohmann/json.hpp>

#include "args/args.h"
#include "comm/parallel_state.h"

namespace mt {

// The record saved in every checkpoint's meta.json: the tokenizer, the model
// with its vocabulary padding, the seed and the pipeline layout. Resolves the
// tokenizer flags and finalizes args.model on the way.
nlohmann::json resolve_run_args(TrainArgs& args, int64_t loaded_iteration,
                                const ParallelState& ps);

// --use-checkpoint-args: every model flag not given takes the checkpoint's value.
void adopt_checkpoint_model(TrainArgs& args);

}  // namespace mt
