// A tiny GPT on one rank with all of its memory, for model tests.
#pragma once
#include <cstdint>
#include <vector>

#include "core/arena.h"
#include "model/gpt.h"
#include "model/params.h"

namespace mt {

struct TinyGpt {
  ParamRegistry reg;
  GptShapes sh;
  HostBuffer params_buf, grads_buf, act_buf;
  float* params = nullptr;
  float* grads = nullptr;
  GptWeights w, g;
  GptActivations act;
  GptWorkspace ws;

  TinyGpt(const ModelConfig& cfg, int64_t micro_batch)
      : reg(cfg, StageLayout{0, 1, 0, cfg.num_layers, true, true}), sh(make_shapes(reg, micro_batch)) {
    params_buf = HostBuffer(size_t(reg.total_floats()) * 4);
    grads_buf = HostBuffer(size_t(reg.total_floats()) * 4);
    params = reinterpret_cast<float*>(params_buf.data());
    grads = reinterpret_cast<float*>(grads_buf.data());
    w = bind_weights(reg, params);
    g = bind_weights(reg, grads);
    Arena plan;
    carve_activations(plan, sh);
    carve_workspace(plan, sh);
    act_buf = HostBuffer(plan.used());
    Arena real(act_buf.data(), act_buf.size());
    act = carve_activations(real, sh);
    ws = carve_workspace(real, sh);
  }
  void zero_grads() {
    for (int64_t i = 0; i < reg.total_floats(); ++i) grads[i] = 0.f;
  }
  // Mean token loss; in training also accumulates gradients of that mean.
  double loss(const std::vector<int32_t>& tokens, const std::vector<int32_t>& labels,
              PassContext ctx, bool backward) {
    const double n = double(sh.tokens());
    ctx.grad_scale = float(1.0 / n);
    const double sum = gpt_forward(w, backward ? &g : nullptr, act, ws, sh, tokens.data(),
                                   labels.data(), ctx);
    if (backward) gpt_backward(w, g, act, ws, sh, ctx);
    return sum / n;
  }
};

}  // namespace mt
