// A tiny GPT on one rank with all of its memory (a ModelRuntime), for model tests.
#pragma once
#include <cstdint>
#include <vector>

#include "model/gpt.h"
#include "model/model_runtime.h"
#include "model/params.h"

namespace mt {

struct TinyGpt {
  ParamRegistry reg;
  ModelRuntime rt;
  const GptShapes& sh;
  float* params;
  float* grads;
  GptWorkspace& ws;

  TinyGpt(const ModelConfig& cfg, int64_t micro_batch, MathMode math = MathMode::kF32)
      : reg(cfg, StageLayout{0, 1, 0, cfg.num_layers, true, true}),
        rt(reg, micro_batch, TensorParallel{}, 1, Recompute{}, math),
        sh(rt.sh),
        params(rt.params),
        grads(rt.grads),
        ws(rt.ws) {}
  void zero_grads() { rt.zero_grads(); }
  // Mean token loss; with `backward` also accumulates the gradient of that mean.
  double loss(const std::vector<int32_t>& tokens, const std::vector<int32_t>& labels,
              PassContext ctx, bool backward) {
    MicroBatchInput mb;
    mb.tokens = tokens;
    mb.labels = labels;
    return loss(mb, ctx, backward);
  }
  // The same for a micro-batch with its document arrays; the mean is over
  // the tokens its loss mask counts.
  double loss(const MicroBatchInput& mb, PassContext ctx, bool backward) {
    const double n = mb.loss_mask.empty() ? double(sh.tokens()) : double(mb.loss_tokens);
    ctx.grad_scale = float(1.0 / double(sh.tokens()));  // gpt_forward rescales masked rows by b·s / counted
    const double sum = gpt_forward(rt.w(), backward ? &rt.chunks[0].g : nullptr, rt.slots()[0].act, rt.ws, sh,
                                   mb, ctx);
    if (backward) gpt_backward(rt.w(), rt.g(), rt.slots()[0].act, rt.ws, sh, ctx);
    return sum / n;
  }
};

}  // namespace mt
