// LayerNorm over the last dimension c, eps as Megatron (1e-5 default).
// Input, output, weight and bias are fp32 or bf16 storage (ReadView /
// WriteView: a bf16 run's activations and weights); statistics, gradients
// and the arithmetic are fp32. A bf16 input is summed in the vectoriser's
// own order for that type: the result may differ from the fp32 call on the
// same (widened) values in the last bit, deterministically.
#pragma once
#include <cstdint>

#include "kernels/precision.h"

namespace mt {

// zero_centered_gamma (Megatron's --apply-layernorm-1p): the stored weight
// is gamma - 1 and the norm scales by (1 + weight), added as it is read (no
// copy); dweight is the same gradient (d gamma / d weight = 1).

// out (n, c) =, mean (n) =, rstd (n) =
void layernorm_forward(WriteView out, float* mean, float* rstd, ReadView inp, ReadView weight,
                       ReadView bias, int64_t n, int64_t c, float eps,
                       bool zero_centered_gamma = false);
// dinp (n, c) +=, dweight (c) +=, dbias (c) +=
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        ReadView inp, ReadView weight, const float* mean,
                        const float* rstd, int64_t n, int64_t c,
                        bool zero_centered_gamma = false);

}  // namespace mt
