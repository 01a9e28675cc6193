// CUDA twin of kernels/reduce.h (same signatures; x on the GPU; the results of
// sum_squares and all_finite come back to the host, so those two wait for the GPU).
#pragma once
#include <cstdint>

namespace mt::cuda {

double sum_squares(const float* x, int64_t n);  // in double, deterministic (fixed tree)
void scale_inplace(float* x, int64_t n, float alpha);
bool all_finite(const float* x, int64_t n);

}  // namespace mt::cuda
