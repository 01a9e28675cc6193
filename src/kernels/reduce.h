// Small reductions and scalings over flat buffers (grad norm, clipping, checks).
#pragma once
#include <cstddef>
#include <cstdint>

namespace mt {

double sum_squares(const float* x, int64_t n);  // in double, deterministic for a thread count

// A run of floats (one of the optimizer's segments).
struct FloatRange {
  const float* x;
  int64_t n;
};
// Σ of sum_squares over the ranges, in their order (the same bits), in one
// parallel region on the host: every thread sums its slice of every range.
double sum_squares(const FloatRange* ranges, size_t count);
void scale_inplace(float* x, int64_t n, float alpha);
// y += alpha · x (gradient shards accumulated over micro-batches). y, x: (n)
void add_scaled_inplace(float* y, const float* x, int64_t n, float alpha);
bool all_finite(const float* x, int64_t n);
// fp16 loss scaling: grads *= inv_scale [=]; returns true when any gradient
// was inf or NaN before scaling (the step must then be skipped). The caller
// reduces the flag over the model-parallel (and, without a shared buffer,
// data-parallel) group. grads: (n)
bool unscale_and_check(float* grads, int64_t n, float inv_scale);
// Elements of x that are inf or NaN, and the first one's index (-1: none).
int64_t count_nonfinite(const float* x, int64_t n, int64_t* first);

}  // namespace mt
