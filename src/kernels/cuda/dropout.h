// CUDA twin of kernels/dropout.h (same signatures; GPU pointers). The masks
// are the CPU's, bit for bit: the same Philox words of the same global indices.
#pragma once
#include <cstdint>

#include "kernels/dropout.h"
#include "kernels/precision.h"

namespace mt::cuda {

// out (s_local, b, h_local) = residual + dropout(x)         [out: =; may alias residual]
void dropout_add_forward(WriteView out, const float* x, ReadView residual, int64_t s_local,
                         int64_t b, int64_t h_local, const DropoutSpec& d);
// out = dropout(x)                                          [out: =; may alias x]
void dropout_forward(WriteView out, const float* x, int64_t s_local, int64_t b, int64_t h_local,
                     const DropoutSpec& d);
// dx = mask * dout / (1 - p)                                [dx: =; may alias dout]
void dropout_backward(float* dx, const float* dout, int64_t s_local, int64_t b, int64_t h_local,
                      const DropoutSpec& d);

}  // namespace mt::cuda
