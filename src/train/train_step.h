// One training iteration after the data is chosen: the schedule's forward and
// backward over the micro-batches (1F1B; without pipelining, gradient
// accumulation), gradient sync (SP grads over TP, DP average, tied embedding
// over the embedding group), the global grad norm, the NaN/Inf check,
// clipping and the AdamW step.
#pragma once
#include <cstdint>

#include "dist/parallel_state.h"
#include "optim/optimizer.h"
#include "pipeline/model_runtime.h"
#include "pipeline/schedules.h"
#include "train/grad_sync.h"

namespace mt {

struct StepResult {
  double loss = 0;          // mean token loss over the global batch
  double grad_norm = 0;     // before clipping
  double wait_seconds = 0;  // this rank's time blocked on pipeline neighbours
};

// `schedule`: this rank's op list (training_schedule), built once per run.
StepResult train_step(ModelRuntime& rt, AdamWOptimizer& opt, GradSync& sync, ParallelState& ps,
                      const std::vector<PipeOp>& schedule, int64_t iteration, double lr,
                      int64_t num_micro_batches, int64_t tokens_per_iteration, uint64_t seed,
                      const MicroBatchFn& next);

// The pipeline neighbours of this rank.
PipelineLinks pipeline_links(const ParallelState& ps);

}  // namespace mt
