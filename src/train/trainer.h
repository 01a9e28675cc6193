// The training loop: for each iteration, forward/backward over the
// micro-batches (gradient accumulation) → DP gradient all-reduce → global
// grad norm → NaN/Inf check → clip → AdamW step → log → eval → save → exit checks.
#pragma once
#include <cstdint>
#include <functional>

#include "args/args.h"
#include "comm/parallel_state.h"

namespace mt {

// What a library client (include/megatron/trainer.h) is told as the run goes,
// on every rank (the values are the same on all).
struct StepReport {
  int64_t iteration = 0;
  double loss = 0;       // mean token loss over the global batch
  double grad_norm = 0;  // before clipping
  double lr = 0;
  int world_rank = 0;    // the rank it is told on
};
struct EvalReport {
  int64_t iteration = 0;
  double loss = 0;       // mean token loss over --eval-iters batches
  bool test = false;     // the test split, else the validation split
  int world_rank = 0;
};
struct TrainHooks {
  std::function<void(const StepReport&)> on_step;  // after each iteration's log line
  std::function<void(const EvalReport&)> on_eval;  // after each evaluation
};

// Returns the process exit code (0: finished, or saved and stopped on request).
int run_training(TrainArgs args, ParallelState& ps, const TrainHooks& hooks = {});

}  // namespace mt
