// AdamW with the element-wise arithmetic of torch.optim.AdamW (single-tensor
// path, amsgrad=False, maximize=False). torch evaluates the scalar factors in
// Python (double) and applies them to float32 tensors as float scalars:
//   param.mul_(1 - lr*wd)
//   exp_avg.lerp_(grad, 1 - beta1)           # m + w (g - m), w < 0.5
//   exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
//   denom = (exp_avg_sq.sqrt() / sqrt(1 - beta2**t)).add_(eps)
//   param.addcdiv_(exp_avg, denom, value=-lr / (1 - beta1**t))
// Each line below mirrors one of these, in the same operation order. Gradient
// clipping (torch's grad.mul_(clip_coef)) is the product by grad_scale.
#include "kernels/adamw.h"

#include <cmath>

#include "backend/device.h"
#include "core/error.h"
#include "kernels/cpu_isa.h"
#include "kernels/cuda/adamw.h"
#include "kernels/precision.h"

namespace mt {

namespace {

// The update loop; with WithCopy the bf16 copy of each new param is written too.
template <bool WithCopy>
void adamw_loop(float* param, const float* grad, float* m, float* v, int64_t n, float gscale,
                float decay, float w1, bool lerp_low, float beta2, float one_minus_b2,
                float bc2_sqrt, float eps, float neg_step_size, uint16_t* param_bf16) {
  for_slices_on_isa(n, [=](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
      const float g = grad[i] * gscale;  // exact when gscale = 1
      const float p = param[i] * decay;
      const float mi = lerp_low ? m[i] + w1 * (g - m[i]) : g - (g - m[i]) * (1.f - w1);
      const float vi = v[i] * beta2 + one_minus_b2 * g * g;
      const float denom = std::sqrt(vi) / bc2_sqrt + eps;
      const float updated = p + neg_step_size * mi / denom;
      param[i] = updated;
      m[i] = mi;
      v[i] = vi;
      if constexpr (WithCopy) param_bf16[i] = bf16_from_f32(updated);
    }
  });
}

}  // namespace

// param, m, v (n): updated in place (=). grad (n): read only. param_bf16: =.
void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n,
                const AdamWHyper& h, int64_t step, uint16_t* param_bf16) {
  MT_CHECK(step >= 1, "adamw_step: step=", step,
           " must be >= 1 (1-based); fix: pass iteration + 1");
  MT_CHECK(h.beta1 >= 0.f && h.beta1 < 1.f && h.beta2 >= 0.f && h.beta2 < 1.f,
           "adamw_step: betas (", h.beta1, ", ", h.beta2, ") must be in [0, 1)");
  if (MT_ON_DEVICE(param))
    return cuda::adamw_step(param, grad, m, v, n, h, step, param_bf16);
  const double lr = h.lr, wd = h.weight_decay, b1 = h.beta1, b2 = h.beta2;
  const double bias_correction1 = 1.0 - std::pow(b1, double(step));
  const double bias_correction2 = 1.0 - std::pow(b2, double(step));
  const float decay = float(1.0 - lr * wd);
  const float w1 = float(1.0 - b1);  // lerp weight
  const float one_minus_b2 = float(1.0 - b2);
  const float bc2_sqrt = float(std::sqrt(bias_correction2));
  const float neg_step_size = float(-(lr / bias_correction1));
  // torch's lerp switches formula at |w| = 0.5 for accuracy; so do we.
  const bool lerp_low = std::fabs(w1) < 0.5f;
  if (param_bf16 != nullptr)
    adamw_loop<true>(param, grad, m, v, n, h.grad_scale, decay, w1, lerp_low, h.beta2,
                     one_minus_b2, bc2_sqrt, h.eps, neg_step_size, param_bf16);
  else
    adamw_loop<false>(param, grad, m, v, n, h.grad_scale, decay, w1, lerp_low, h.beta2,
                      one_minus_b2, bc2_sqrt, h.eps, neg_step_size, nullptr);
}

}  // namespace mt
