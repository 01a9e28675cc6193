// One rank's model in memory: parameter and gradient buffers, weight views,
// the activation record(s) and workspace — planned once, touched at start-up,
// reused every step. Schedules run micro-batches through it.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/arena.h"
#include "model/gpt.h"
#include "model/params.h"

namespace mt {

class ModelRuntime {
 public:
  ModelRuntime(const ParamRegistry& reg, int64_t micro_batch,
               const TensorParallel& tp = TensorParallel{});

  const ParamRegistry& reg;
  const GptShapes sh;
  float* params = nullptr;  // (total_floats)
  float* grads = nullptr;   // (total_floats)
  GptWeights w, g;          // views of params / grads
  GptActivations act;       // one record: no pipelining keeps one micro-batch in flight
  GptWorkspace ws;
  std::vector<int32_t> tokens, labels;  // (b, s) of the current micro-batch

  size_t param_bytes() const { return size_t(reg.total_floats()) * sizeof(float); }
  size_t activation_bytes() const { return act_buf_.size(); }
  void zero_grads();

 private:
  HostBuffer params_buf_, grads_buf_, act_buf_;
};

// Fills tokens/labels (b, s) of micro-batch k; returns the global index of its
// first sample (which keys its dropout masks).
using MicroBatchFn = std::function<int64_t(int64_t k, int32_t* tokens, int32_t* labels)>;

// Megatron's forward_backward_no_pipelining: forward and backward of each of
// num_micro_batches micro-batches in turn, gradients accumulating (+=); the
// last micro-batch's backward reports final gradients through `grads_ready`
// (may be null). Returns the sum of token losses.
double forward_backward_no_pipelining(ModelRuntime& rt, int64_t num_micro_batches,
                                      const PassContext& ctx, const MicroBatchFn& next,
                                      const std::function<void(int64_t)>* grads_ready = nullptr);

// Forward only, no gradients (evaluation). Returns the sum of token losses.
double forward_only(ModelRuntime& rt, int64_t num_micro_batches, const PassContext& ctx,
                    const MicroBatchFn& next);

}  // namespace mt
