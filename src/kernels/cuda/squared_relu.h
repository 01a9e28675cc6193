// CUDA twin of kernels/squared_relu.h (same signatures; GPU pointers).
#pragma once
#include <cstdint>

#include "kernels/precision.h"

namespace mt::cuda {

// out (n) =
void squared_relu_forward(WriteView out, ReadView inp, int64_t n);
// dinp (n) = dout * 2 relu(inp)   (may alias dout)
void squared_relu_backward(float* dinp, ReadView inp, const float* dout, int64_t n);

}  // namespace mt::cuda
