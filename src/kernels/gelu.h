// GELU, tanh approximation (GPT-2 / Megatron's openai_gelu / torch approximate="tanh").
#pragma once
#include <cstdint>

namespace mt {

// out (n) =
void gelu_forward(float* out, const float* inp, int64_t n);
// dinp (n) = dout * gelu'(inp)   (may alias dout)
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n);

}  // namespace mt
