// The training loop: for each iteration, forward/backward over the
// micro-batches (gradient accumulation) → DP gradient all-reduce → global
// grad norm → NaN/Inf check → clip → AdamW step → log → eval → save → exit checks.
#pragma once
#include "comm/parallel_state.h"
#include "train/args.h"

namespace mt {

// Returns the process exit code (0: finished, or saved and stopped on request).
int run_training(TrainArgs args, ParallelState& ps);

}  // namespace mt
