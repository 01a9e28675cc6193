// Softmax cross-entropy fused with the output softmax: the logits buffer is
// turned into its own gradient in place, so no (n, v) probability tensor is kept.
#pragma once
#include <cstdint>

namespace mt {

// logits (n, v), targets (n) in [0, v).
// losses (n) = -log softmax(logits)[target]                      [=]
// if grad_scale != 0: logits (n, v) = grad_scale * (softmax - onehot(target))  [in place]
void softmax_cross_entropy(float* losses, float* logits, const int32_t* targets, int64_t n,
                           int64_t v, float grad_scale);

}  // namespace mt
