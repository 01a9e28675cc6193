#include "pipeline/model_runtime.h"

#include <algorithm>

namespace mt {

ModelRuntime::ModelRuntime(const ParamRegistry& r, int64_t micro_batch, const TensorParallel& tp,
                           int64_t in_flight)
    : reg(r), sh(make_shapes(r, micro_batch, tp)) {
  MT_CHECK(in_flight >= 1, "in-flight micro-batches ", in_flight, " must be >= 1");
  params_buf_ = HostBuffer(param_bytes());
  grads_buf_ = HostBuffer(param_bytes());
  params = reinterpret_cast<float*>(params_buf_.data());
  grads = reinterpret_cast<float*>(grads_buf_.data());
  w = bind_weights(reg, params);
  g = bind_weights(reg, grads);
  Arena plan;
  for (int64_t i = 0; i < in_flight; ++i) carve_activations(plan, sh);
  carve_workspace(plan, sh);
  act_buf_ = HostBuffer(plan.used());
  Arena real(act_buf_.data(), act_buf_.size());
  slots.resize(size_t(in_flight));
  for (MicroBatchSlot& s : slots) {
    s.act = carve_activations(real, sh);
    s.tokens.resize(size_t(sh.tokens()));
    s.labels.resize(size_t(sh.tokens()));
  }
  ws = carve_workspace(real, sh);
}

void ModelRuntime::zero_grads() { std::fill(grads, grads + reg.total_floats(), 0.f); }

}  // namespace mt
