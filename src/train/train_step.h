// One training iteration after the data is chosen: the schedule's forward and
// backward over the micro-batches, the DP gradient average, the global grad
// norm, the NaN/Inf check, clipping and the AdamW step.
#pragma once
#include <cstdint>

#include "dist/parallel_state.h"
#include "optim/optimizer.h"
#include "pipeline/model_runtime.h"
#include "train/grad_sync.h"

namespace mt {

struct StepResult {
  double loss = 0;       // mean token loss over the global batch
  double grad_norm = 0;  // before clipping
};

StepResult train_step(ModelRuntime& rt, AdamWOptimizer& opt, GradSync& sync, ParallelState& ps,
                      int64_t iteration, double lr, int64_t num_micro_batches,
                      int64_t tokens_per_iteration, uint64_t seed, const MicroBatchFn& next);

}  // namespace mt
