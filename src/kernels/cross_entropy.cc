// Fused softmax cross-entropy over rows of logits (n, v). Numerically stable
// (max subtracted before exp). With grad_scale != 0 the logits buffer becomes
// d(grad_scale * sum(losses)) / d(logits) in place: the exponentials are stored
// during the sum pass and normalised afterwards, so exp is computed once
// (vectorised exp_f32 from vec_math.h: libm's expf is ~8x slower here).
#include "kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/vec_math.h"

namespace mt {

// losses (n) = -log softmax(logits)[target]                      [=]
// if grad_scale != 0: logits (n, v) = grad_scale * (softmax - onehot(target))  [in place]
void softmax_cross_entropy(float* losses, float* logits, const int32_t* targets, int64_t n,
                           int64_t v, float grad_scale) {
  MT_CHECK(n >= 0 && v > 0, "softmax_cross_entropy: bad shape n=", n, " v=", v,
           "; fix: pass the row count and a positive vocabulary size");
  for (int64_t i = 0; i < n; ++i)
    MT_CHECK(targets[i] >= 0 && targets[i] < v, "softmax_cross_entropy: target id ", targets[i],
             " at row ", i, " is outside [0, ", v,
             "); fix: check the dataset's token ids against the model's vocab size");
  const bool want_grad = grad_scale != 0.f;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float* z = logits + i * v;
    const int64_t tgt = targets[i];
    float mx = z[0];
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < v; ++j) mx = std::max(mx, z[j]);
    const float z_target = z[tgt];
    // The sum of up to ~1e5 terms in [0, 1] is taken in double so the loss
    // does not depend on float round-off of the vocabulary size.
    double sum = 0.0;
    if (want_grad) {
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < v; ++j) {
        const float e = exp_f32(z[j] - mx);
        z[j] = e;
        sum += double(e);
      }
    } else {
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < v; ++j) sum += double(exp_f32(z[j] - mx));
    }
    losses[i] = float(std::log(sum) - double(z_target - mx));
    if (want_grad) {
      const float mul = float(double(grad_scale) / sum);
#pragma omp simd
      for (int64_t j = 0; j < v; ++j) z[j] *= mul;
      z[tgt] -= grad_scale;
    }
  }
}

}  // namespace mt
