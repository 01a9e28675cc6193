// Megatron's VocabParallelEmbedding as a forward/backward pair over a TP
// group: each rank holds rows [v_start, v_start + v_local) of the word
// embedding; a lookup of an id in another rank's rows gives zeros here, and
// the ranks' partial lookups are summed — all-reduced (reduce_from_tp_region),
// or with sequence parallelism reduce-scattered so each rank keeps its slab
// of s/tp positions (reduce_scatter_to_sequence_parallel_region).
// `n` is the full token count s·b; slabs hold n/tp rows.
#pragma once
#include <cstdint>

#include "parallel/tensor_parallel_linear.h"

namespace mt {

// out: (n, h) replicated, or with SP this rank's slab (n/tp, h).        [=]
// `full` (n, h) is workspace with SP (unused otherwise).
void vocab_parallel_embedding_forward(float* out, float* full, const int32_t* ids,
                                      ReadView table, int64_t n, int64_t h, int64_t v_start,
                                      int64_t v_local, const TensorParallel& tp);
// dout: (n, h) replicated, or with SP the slab (n/tp, h), all-gathered into
// `full` (n, h) first. dtable (v_local, h) += this shard's rows.
void vocab_parallel_embedding_backward(float* dtable, float* full, const float* dout,
                                       const int32_t* ids, int64_t n, int64_t h, int64_t v_start,
                                       int64_t v_local, const TensorParallel& tp);

}  // namespace mt
