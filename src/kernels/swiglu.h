// SwiGLU, Megatron's --swiglu (bias_swiglu_impl without bias) and Llama's MLP:
// the first linear layer outputs [gate | up] and out = silu(gate) * up.
// Input and output are fp32 or bf16 storage; the arithmetic and gradients fp32.
#pragma once
#include <cstdint>

#include "kernels/precision.h"

namespace mt {

// in (n, 2f): each row is [gate (f) | up (f)];  out (n, f) = silu(gate) * up,
// silu(x) = x * sigmoid(x)
void swiglu_forward(WriteView out, ReadView in, int64_t n, int64_t f);
// din (n, 2f) = [dout * up * silu'(gate) | dout * silu(gate)]  (overwrite, not accumulate);
// din may not alias dout
void swiglu_backward(float* din, ReadView in, const float* dout, int64_t n, int64_t f);

}  // namespace mt
