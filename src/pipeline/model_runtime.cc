#include "pipeline/model_runtime.h"

#include <algorithm>

namespace mt {

ModelRuntime::ModelRuntime(const ParamRegistry& r, int64_t micro_batch, const TensorParallel& tp)
    : reg(r), sh(make_shapes(r, micro_batch, tp)) {
  params_buf_ = HostBuffer(param_bytes());
  grads_buf_ = HostBuffer(param_bytes());
  params = reinterpret_cast<float*>(params_buf_.data());
  grads = reinterpret_cast<float*>(grads_buf_.data());
  w = bind_weights(reg, params);
  g = bind_weights(reg, grads);
  Arena plan;
  carve_activations(plan, sh);
  carve_workspace(plan, sh);
  act_buf_ = HostBuffer(plan.used());
  Arena real(act_buf_.data(), act_buf_.size());
  act = carve_activations(real, sh);
  ws = carve_workspace(real, sh);
  tokens.resize(size_t(sh.tokens()));
  labels.resize(size_t(sh.tokens()));
}

void ModelRuntime::zero_grads() { std::fill(grads, grads + reg.total_floats(), 0.f); }

double forward_backward_no_pipelining(ModelRuntime& rt, int64_t num_micro_batches,
                                      const PassContext& ctx, const MicroBatchFn& next,
                                      const std::function<void(int64_t)>* grads_ready) {
  double loss_sum = 0;
  PassContext c = ctx;
  for (int64_t k = 0; k < num_micro_batches; ++k) {
    rt.act.sample0 = next(k, rt.tokens.data(), rt.labels.data());
    c.grads_ready = k + 1 == num_micro_batches ? grads_ready : nullptr;
    loss_sum += gpt_forward(rt.w, &rt.g, rt.act, rt.ws, rt.sh, rt.tokens.data(), rt.labels.data(), c);
    gpt_backward(rt.w, rt.g, rt.act, rt.ws, rt.sh, c);
  }
  return loss_sum;
}

double forward_only(ModelRuntime& rt, int64_t num_micro_batches, const PassContext& ctx,
                    const MicroBatchFn& next) {
  double loss_sum = 0;
  for (int64_t k = 0; k < num_micro_batches; ++k) {
    rt.act.sample0 = next(k, rt.tokens.data(), rt.labels.data());
    loss_sum += gpt_forward(rt.w, nullptr, rt.act, rt.ws, rt.sh, rt.tokens.data(), rt.labels.data(), ctx);
  }
  return loss_sum;
}

}  // namespace mt
