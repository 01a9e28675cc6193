#include "train/train_step.h"

#include <cmath>

namespace mt {

PipelineLinks pipeline_links(const ParallelState& ps) {
  return PipelineLinks{&ps.pp_comm, ps.pp_rank, ps.pp_size};
}

StepResult train_step(ModelRuntime& rt, AdamWOptimizer& opt, GradSync& sync, ParallelState& ps,
                      const std::vector<PipeOp>& schedule, int64_t iteration, double lr,
                      int64_t num_micro_batches, int64_t tokens_per_iteration, uint64_t seed,
                      const MicroBatchFn& next) {
  rt.zero_grads();
  PassContext ctx;
  ctx.seed = seed;
  ctx.iteration = iteration;
  ctx.grad_scale = float(1.0 / double(rt.sh.tokens() * num_micro_batches));
  StepResult r;
  double loss_sum = run_pipeline_schedule(rt, pipeline_links(ps), schedule, ctx, next,
                                          &sync.hook(), &r.wait_seconds);
  sync.finish();  // TP sum of sequence-parallel grads, DP average, tied embedding
  if (ps.pp_size > 1) ps.pp_comm.all_reduce_sum(&loss_sum, 1);  // the last stage's loss
  ps.dp_comm.all_reduce_sum(&loss_sum, 1);
  r.loss = loss_sum / double(tokens_per_iteration);
  r.grad_norm = opt.grad_norm(rt.grads, ps.mp_comm.size() > 1 ? &ps.mp_comm : nullptr);
  MT_CHECK(std::isfinite(r.loss) && std::isfinite(r.grad_norm), "iteration ", iteration,
           ": loss ", r.loss, ", grad norm ", r.grad_norm,
           " is not finite; stopped before the update, without saving (the last good checkpoint, "
           "if any, is untouched); fix: lower --lr, raise --lr-warmup-iters or set --clip-grad");
  opt.clip(rt.grads, r.grad_norm);
  opt.step(rt.params, rt.grads, lr);
  return r;
}

}  // namespace mt
