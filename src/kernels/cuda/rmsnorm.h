// CUDA twin of kernels/rmsnorm.h (same signatures; GPU pointers).
#pragma once
#include <cstdint>

#include "kernels/precision.h"

namespace mt::cuda {

// out (n, c) =, rstd (n) =
void rmsnorm_forward(WriteView out, float* rstd, ReadView inp, ReadView weight, int64_t n,
                     int64_t c, float eps, bool zero_centered_gamma = false);
// dinp (n, c) +=, dweight (c) +=
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, ReadView inp,
                      ReadView weight, const float* rstd, int64_t n, int64_t c,
                      bool zero_centered_gamma = false);

}  // namespace mt::cuda
