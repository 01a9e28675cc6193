// Gradient synchronisation after backward, driven by the model's
// "gradients of this part are final" hook during the last micro-batch:
//   1. with sequence parallelism, parameters replicated over TP (LayerNorms,
//      row-parallel biases, position embeddings) saw only this rank's slab:
//      their gradients are summed over TP (Megatron's _allreduce_layernorm_grads);
//   2. the DP average in buckets (optim/grad_buckets), started as soon as a
//      bucket is complete when --overlap-grad-reduce is on.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "dist/parallel_state.h"
#include "optim/grad_buckets.h"
#include "pipeline/model_runtime.h"

namespace mt {

class GradSync {
 public:
  GradSync(const ModelRuntime& rt, const ParallelState& ps, int64_t bucket_size_floats,
           bool overlap);

  // The hook for the last micro-batch's backward (PassContext::grads_ready).
  const std::function<void(int64_t)>& hook() const { return hook_; }
  // Completes whatever the hook did not: after backward, before the grad norm.
  void finish();
  // Seconds in TP and DP communication (the model's TP collectives included)
  // since the last reset_timers().
  double comm_seconds() const;
  void reset_timers();
  const GradBuckets& buckets() const { return *buckets_; }

 private:
  void part_ready(int64_t part);

  const ModelRuntime& rt_;
  const ParallelState& ps_;
  std::unique_ptr<GradBuckets> buckets_;
  std::vector<std::vector<size_t>> params_of_part_;  // index: part + 1 (part -1 = embedding)
  std::vector<bool> part_done_;
  std::function<void(int64_t)> hook_;
};

}  // namespace mt
