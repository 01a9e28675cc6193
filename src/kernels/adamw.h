// AdamW as torch.optim.AdamW (decoupled weight decay, bias correction).
#pragma once
#include <cstddef>
#include <cstdint>

namespace mt {

struct AdamWHyper {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.f;
  // g = grad * grad_scale (the clip coefficient, applied in this pass instead
  // of a sweep of its own; the same float product as scaling grad first).
  float grad_scale = 1.f;
};

// step is 1-based. param, m, v updated in place (g = grad * grad_scale):
// param *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g²;
// param -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
// param_bf16 (n), if non-null: = bf16 of the updated param, in the same pass
// (the bf16 weight copy of mixed precision, without a second sweep).
void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n,
                const AdamWHyper& h, int64_t step, uint16_t* param_bf16 = nullptr);

// One tensor (or a part of one) of a step over many: adamw_step's arguments.
struct AdamWSegment {
  float* param;
  const float* grad;
  float* m;
  float* v;
  int64_t n;
  AdamWHyper h;
  uint16_t* param_bf16 = nullptr;
};

// adamw_step on each segment (the same numbers, element for element), on the
// host in one parallel region: every thread takes its slice of every segment
// (a model's small tensors do not pay a region each: config (a) has 52).
// Segments live all on the host or all on the device.
void adamw_step(const AdamWSegment* segments, size_t count, int64_t step);

}  // namespace mt
