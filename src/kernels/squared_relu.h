// Squared ReLU, Megatron's --squared-relu MLP activation
// (megatron/core/activations.py: pow(relu(x), 2)), non-gated:
//   y = relu(x)^2,  dy/dx = 2 relu(x).
// Input and output are fp32 or bf16 storage; the arithmetic and gradients fp32.
// Backward needs only the input (fc1's output, which the MLP saves anyway).
#pragma once
#include <cstdint>

#include "kernels/precision.h"

namespace mt {

// out (n) =
void squared_relu_forward(WriteView out, ReadView inp, int64_t n);
// dinp (n) = dout * 2 relu(inp)   (may alias dout)
void squared_relu_backward(float* dinp, ReadView inp, const float* dout, int64_t n);

}  // namespace mt
