// GELU, tanh approximation (GPT-2 / Megatron's openai_gelu / torch approximate="tanh").
// Input and output are fp32 or bf16 storage; the arithmetic and gradients fp32.
#pragma once
#include <cstdint>

#include "kernels/precision.h"

namespace mt {

// out (n) =
void gelu_forward(WriteView out, ReadView inp, int64_t n);
// dinp (n) = dout * gelu'(inp)   (may alias dout)
void gelu_backward(float* dinp, ReadView inp, const float* dout, int64_t n);

}  // namespace mt
