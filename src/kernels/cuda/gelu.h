// CUDA twin of kernels/gelu.h (same signatures; GPU pointers).
#pragma once
#include <cstdint>

#include "kernels/precision.h"

namespace mt::cuda {

// out (n) =
void gelu_forward(WriteView out, ReadView inp, int64_t n);
// dinp (n) = dout * gelu'(inp)   (may alias dout)
void gelu_backward(float* dinp, ReadView inp, const float* dout, int64_t n);

}  // namespace mt::cuda
