// Megatron's vocab-parallel cross-entropy: each TP rank holds the logits of
// its vocabulary shard; all-reduces of the row max, of the sum of exponentials
// and of the target logit give every rank the full loss, and each rank's
// logits turn into their own gradient. The full logits are never gathered.
#pragma once
#include <cstdint>

#include "comm/communicator.h"
#include "kernels/precision.h"

namespace mt {

// Scratch for n rows: one float and two doubles per row.
struct CrossEntropyScratch {
  float* row_max = nullptr;      // (n)
  double* sum_exp = nullptr;     // (n)
  double* target_logit = nullptr;  // (n)
};

// logits (n, v_local), vocabulary columns [v_start, v_start + v_local) of v_global;
// targets (n) global ids. losses (n) = (the same on every TP rank).
// if grad_scale != 0: grad (n, v_local) = grad_scale * (softmax - onehot) for
// this shard: the logits themselves (in place) or a bf16 array; the logits
// are overwritten either way. tp may be null (no tensor parallelism); without
// it the rows run fused (kernels/cross_entropy.h), with the same results.
// row_scale (n, or null): row i's gradient scale is grad_scale * row_scale[i].
void vocab_parallel_cross_entropy(float* losses, float* logits, WriteView grad,
                                  const int32_t* targets, int64_t n, int64_t v_local,
                                  int64_t v_start, int64_t v_global, float grad_scale,
                                  const CrossEntropyScratch& scratch, const Communicator* tp,
                                  const float* row_scale = nullptr);

}  // namespace mt
