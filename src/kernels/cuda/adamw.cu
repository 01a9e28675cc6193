// AdamW on the GPU with adamw.cc's arithmetic: the same float scalars
// (computed on the host in double, rounded to float, as adamw.cc) and, per
// element, the same float operations in the same order (torch's lerp,
// addcmul, sqrt / bias correction + eps, addcdiv). Either compiler may fuse a
// product and a sum into one FMA, so results agree to float round-off.
// One thread per element.
#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/device_math.cuh"

namespace mt::cuda {

namespace {

constexpr int kThreads = 256;

struct Scalars {
  float gscale, decay, w1, beta2, one_minus_b2, bc2_sqrt, eps, neg_step_size;
  bool lerp_low;
};

__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, int64_t n,
                             Scalars c, uint16_t* param_bf16) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float g = grad[i] * c.gscale;
  const float p = param[i] * c.decay;
  const float m0 = m[i];
  const float mi = c.lerp_low ? m0 + c.w1 * (g - m0) : g - (g - m0) * (1.f - c.w1);
  const float vi = v[i] * c.beta2 + c.one_minus_b2 * g * g;
  const float denom = sqrtf(vi) / c.bc2_sqrt + c.eps;  // IEEE sqrt and division (no fast math)
  const float updated = p + c.neg_step_size * mi / denom;
  param[i] = updated;
  m[i] = mi;
  v[i] = vi;
  if (param_bf16) param_bf16[i] = bf16_of(updated);
}

}  // namespace

// (step and betas checked by the entry point, adamw.cc)
void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWHyper& h,
                int64_t step, uint16_t* param_bf16) {
  if (n <= 0) return;
  // The scalars exactly as adamw.cc derives them.
  const double lr = h.lr, wd = h.weight_decay, b1 = h.beta1, b2 = h.beta2;
  const double bias_correction1 = 1.0 - std::pow(b1, double(step));
  const double bias_correction2 = 1.0 - std::pow(b2, double(step));
  Scalars c;
  c.gscale = h.grad_scale;
  c.decay = float(1.0 - lr * wd);
  c.w1 = float(1.0 - b1);
  c.beta2 = h.beta2;
  c.one_minus_b2 = float(1.0 - b2);
  c.bc2_sqrt = float(std::sqrt(bias_correction2));
  c.eps = h.eps;
  c.neg_step_size = float(-(lr / bias_correction1));
  c.lerp_low = std::fabs(c.w1) < 0.5f;
  adamw_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(param, grad, m, v, n, c,
                                                                   param_bf16);
  MT_CUDA_LAUNCH_CHECK();
}

}  // namespace mt::cuda
