// SGD with momentum as torch.optim.SGD (Megatron-LM's --optimizer sgd:
// dampening 0, nesterov off, weight decay added to the gradient, i.e. L2, not
// AdamW's decoupled decay).
#pragma once
#include <cstdint>

namespace mt {

struct SgdHyper {
  float lr = 1e-3f, momentum = 0.9f, weight_decay = 0.f;
  // g = grad * grad_scale (the clip coefficient, as in adamw.h).
  float grad_scale = 1.f;
};

// param, momentum_buf (n): updated in place (=); grad (n): read only.
//   d = g + wd * param;  buf = momentum * buf + d;  param -= lr * buf
// (torch starts the buffer as a copy of d on the first step, which is what
// momentum * 0 + d gives: pass a zeroed buffer before the first step). With
// momentum 0 the buffer is not touched and param -= lr * d.
// param_bf16 (n), if non-null: = bf16 of the updated param.
void sgd_step(float* param, const float* grad, float* momentum_buf, int64_t n, const SgdHyper& h,
              uint16_t* param_bf16 = nullptr);

}  // namespace mt
