// torch.optim.SGD's single-tensor step, in its operation order and float
// arithmetic (the scalars as floats, as torch applies Python floats to
// float32 tensors):
//   d_p = grad.add(param, alpha=weight_decay)
//   buf.mul_(momentum).add_(d_p)            # dampening 0
//   param.add_(buf, alpha=-lr)
#include "kernels/sgd.h"

#include "backend/device.h"
#include "core/error.h"
#include "kernels/precision.h"

namespace mt {

void sgd_step(float* param, const float* grad, float* momentum_buf, int64_t n, const SgdHyper& h,
              uint16_t* param_bf16) {
  MT_CHECK(!MT_ON_DEVICE(param), "sgd_step: --optimizer sgd has no GPU kernel yet; fix: "
           "--optimizer adam, or --device cpu");
  MT_CHECK(h.momentum >= 0.f, "sgd_step: momentum ", h.momentum, " must be >= 0");
  const float wd = h.weight_decay, mu = h.momentum, neg_lr = -h.lr, gs = h.grad_scale;
  const bool with_momentum = mu != 0.f;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float d = grad[i] * gs;  // exact when gs = 1
    if (wd != 0.f) d = d + wd * param[i];
    if (with_momentum) {
      d = momentum_buf[i] * mu + d;
      momentum_buf[i] = d;
    }
    const float updated = param[i] + neg_lr * d;
    param[i] = updated;
    if (param_bf16 != nullptr) param_bf16[i] = bf16_from_f32(updated);
  }
}

}  // namespace mt
