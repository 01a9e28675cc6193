// CUDA twin of kernels/layernorm.h (same signatures; GPU pointers).
#pragma once
#include <cstdint>

#include "kernels/precision.h"

namespace mt::cuda {

// out (n, c) =, mean (n) =, rstd (n) =
void layernorm_forward(WriteView out, float* mean, float* rstd, ReadView inp, ReadView weight,
                       ReadView bias, int64_t n, int64_t c, float eps,
                       bool zero_centered_gamma = false);
// dinp (n, c) +=, dweight (c) +=, dbias (c) +=
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        ReadView inp, ReadView weight, const float* mean,
                        const float* rstd, int64_t n, int64_t c,
                        bool zero_centered_gamma = false);

}  // namespace mt::cuda
