// One training iteration after the data is chosen: the schedule's forward and
// backward over the micro-batches (1F1B; without pipelining, gradient
// accumulation), gradient sync (SP grads over TP, DP average, tied embedding
// over the embedding group), the global grad norm, the NaN/Inf check,
// clipping and the AdamW step — then, with the distributed optimizer, the
// all-gather of the updated parameters (with --overlap-param-gather only
// started: the next forward waits for it per bucket, and anything else that
// reads the weights must call sync.wait_params() first).
#pragma once
#include <cstdint>
#include <vector>

#include "comm/parallel_state.h"
#include "model/model_runtime.h"
#include "optim/grad_scaler.h"
#include "optim/optimizer.h"
#include "pipeline/schedules.h"
#include "optim/grad_sync.h"
#include "observe/step_result.h"
#include "train/rerun_check.h"

namespace mt {

// `schedule`: this rank's op list (training_schedule), built once per run.
// `loss_tokens`: the tokens whose loss counts in the whole global batch (b·s
// per sample without a loss mask): the logged loss is over them, and with
// `per_token_loss` (--calculate-per-token-loss) so is the gradient.
// `scaler` (fp16, else null): the loss is scaled before backward, the
// gradients unscaled after the DP reduction; if any rank saw an inf or NaN
// the step is skipped and the scale backs off (Megatron's mixed-precision
// optimizer). `rerun` (--rerun-mode, else null or disabled): its checks after
// the forward and backward, which may run them again or throw RerunExit.
StepResult train_step(ModelRuntime& rt, AdamWOptimizer& opt, GradSync& sync, ParallelState& ps,
                      const std::vector<PipeOp>& schedule, int64_t iteration,
                      const StepRates& rates,
                      int64_t num_micro_batches, int64_t loss_tokens, uint64_t seed,
                      const MicroBatchFn& next, GradScaler* scaler = nullptr,
                      bool check_nan = true,  // false: --no-check-for-nan-in-loss-and-grad
                      bool per_token_loss = false, RerunCheck* rerun = nullptr);

// Parameter i's values (its whole local tensor) into the model's weights
// (bf16-rounded in bf16 runs) and the optimizer's fp32 main weights (bf16
// runs; its owned pieces): what initialisation and loading write.
void set_param_values(ModelRuntime& rt, AdamWOptimizer& opt, size_t i, const float* values);
// Every parameter's initial values from the registry's seeded RNG.
void initialize_weights(ModelRuntime& rt, AdamWOptimizer& opt, uint64_t seed);

// --moe-router-enable-expert-bias: tokens (L, E), this rank's kept pairs per
// MoE layer and expert (MoeStats::expert_tokens), summed over TP x CP x DP in
// place; then each expert bias held here moves by moe_expert_bias_update.
void update_expert_biases(ModelRuntime& rt, AdamWOptimizer& opt, ParallelState& ps,
                          std::vector<double>& tokens);

// The pipeline neighbours of this rank.
PipelineLinks pipeline_links(const ParallelState& ps);

}  // namespace mt
