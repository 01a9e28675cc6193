// Small reductions and scalings over flat buffers (grad norm, clipping, checks).
#pragma once
#include <cstdint>

namespace mt {

double sum_squares(const float* x, int64_t n);  // in double, deterministic for a thread count
void scale_inplace(float* x, int64_t n, float alpha);
bool all_finite(const float* x, int64_t n);

}  // namespace mt
