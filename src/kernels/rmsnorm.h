// RMSNorm over the last dimension c (Megatron's --normalization RMSNorm, as
// torch.nn.RMSNorm / Llama): y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps).
// Input, output and weight are fp32 or bf16 storage (ReadView /
// WriteView: a bf16 run's activations and weights); statistics, gradients
// and the arithmetic are fp32. A bf16 input is summed in the vectoriser's
// own order for that type: the result may differ from the fp32 call on the
// same (widened) values in the last bit, deterministically.
#pragma once
#include <cstdint>

#include "kernels/precision.h"

namespace mt {

// zero_centered_gamma (--apply-layernorm-1p, as Transformer Engine's RMSNorm):
// y = x * rstd * (1 + w), the stored weight is gamma - 1 (kernels/layernorm.h).

// out (n, c) =, rstd (n) =
void rmsnorm_forward(WriteView out, float* rstd, ReadView inp, ReadView weight, int64_t n,
                     int64_t c, float eps, bool zero_centered_gamma = false);
// dinp (n, c) +=, dweight (c) +=
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, ReadView inp,
                      ReadView weight, const float* rstd, int64_t n, int64_t c,
                      bool zero_centered_gamma = false);

}  // namespace mt
