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
#include <vector>

#include "backend/device.h"
#include "core/error.h"
#include "kernels/cpu_isa.h"
#include "kernels/cuda/adamw.h"
#include "kernels/precision.h"

namespace mt {

namespace {

// A segment's scalar factors, as torch computes them (double, then float).
struct AdamWFactors {
  float decay, w1, one_minus_b2, bc2_sqrt, neg_step_size;
  bool lerp_low;  // torch's lerp switches formula at |w| = 0.5 for accuracy
};

AdamWFactors adamw_factors(const AdamWHyper& h, int64_t step) {
  MT_CHECK(h.beta1 >= 0.f && h.beta1 < 1.f && h.beta2 >= 0.f && h.beta2 < 1.f,
           "adamw_step: betas (", h.beta1, ", ", h.beta2, ") must be in [0, 1)");
  const double lr = h.lr, wd = h.weight_decay, b1 = h.beta1, b2 = h.beta2;
  const double bias_correction1 = 1.0 - std::pow(b1, double(step));
  const double bias_correction2 = 1.0 - std::pow(b2, double(step));
  AdamWFactors f;
  f.decay = float(1.0 - lr * wd);
  f.w1 = float(1.0 - b1);  // lerp weight
  f.one_minus_b2 = float(1.0 - b2);
  f.bc2_sqrt = float(std::sqrt(bias_correction2));
  f.neg_step_size = float(-(lr / bias_correction1));
  f.lerp_low = std::fabs(f.w1) < 0.5f;
  return f;
}

// The update of elements [begin, end) of s; with WithCopy the bf16 copy of
// each new param is written too.
template <bool WithCopy>
inline void adamw_slice(const AdamWSegment& s, const AdamWFactors& f, int64_t begin, int64_t end) {
  float* const param = s.param;
  const float* const grad = s.grad;
  float* const m = s.m;
  float* const v = s.v;
  uint16_t* const param_bf16 = s.param_bf16;
  const float gscale = s.h.grad_scale, beta2 = s.h.beta2, eps = s.h.eps, decay = f.decay,
              w1 = f.w1, one_minus_b2 = f.one_minus_b2, bc2_sqrt = f.bc2_sqrt,
              neg_step_size = f.neg_step_size;
  const bool lerp_low = f.lerp_low;
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
}

// This thread's slice (t of nt, as for_slices_on_isa cuts) of every segment.
void adamw_thread(const AdamWSegment* segs, const AdamWFactors* f, size_t count, int64_t t,
                  int64_t nt) {
  for (size_t i = 0; i < count; ++i) {
    const int64_t n = segs[i].n, begin = n * t / nt, end = n * (t + 1) / nt;
    if (segs[i].param_bf16 != nullptr)
      adamw_slice<true>(segs[i], f[i], begin, end);
    else
      adamw_slice<false>(segs[i], f[i], begin, end);
  }
}

}  // namespace

void adamw_step(const AdamWSegment* segments, size_t count, int64_t step) {
  MT_CHECK(step >= 1, "adamw_step: step=", step,
           " must be >= 1 (1-based); fix: pass iteration + 1");
  if (count == 0) return;
  std::vector<AdamWFactors> f(count);  // (checks every segment's betas)
  for (size_t i = 0; i < count; ++i) f[i] = adamw_factors(segments[i].h, step);
  if (MT_ON_DEVICE(segments[0].param)) {
    for (size_t i = 0; i < count; ++i) {
      const AdamWSegment& s = segments[i];
      cuda::adamw_step(s.param, s.grad, s.m, s.v, s.n, s.h, step, s.param_bf16);
    }
    return;
  }
  const AdamWFactors* fs = f.data();
  on_threads_on_isa([=](int64_t t, int64_t nt) { adamw_thread(segments, fs, count, t, nt); });
}

// param, m, v (n): updated in place (=). grad (n): read only. param_bf16: =.
void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n,
                const AdamWHyper& h, int64_t step, uint16_t* param_bf16) {
  const AdamWSegment s{param, grad, m, v, n, h, param_bf16};
  adamw_step(&s, 1, step);
}

}  // namespace mt
