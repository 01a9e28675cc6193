#include "parallel/vocab_parallel_embedding.h"

#include "core/divide.h"
#include "kernels/embedding.h"
#include "parallel/mappings.h"

namespace mt {

void vocab_parallel_embedding_forward(float* out, float* full, const int32_t* ids,
                                      ReadView table, int64_t n, int64_t h, int64_t v_start,
                                      int64_t v_local, const TensorParallel& tp) {
  if (tp.size() > 1 && tp.sequence_parallel) {
    embedding_forward(full, ids, table, n, h, v_start, v_local, false);
    const int64_t slab = divide(n, tp.size(), "tokens by TP (sequence parallelism)");
    reduce_scatter_to_sp_region_forward(out, full, slab * h, *tp.tp);
    return;
  }
  embedding_forward(out, ids, table, n, h, v_start, v_local, false);
  if (tp.size() > 1) reduce_from_tp_region_forward(out, n * h, *tp.tp);
}

void vocab_parallel_embedding_backward(float* dtable, float* full, const float* dout,
                                       const int32_t* ids, int64_t n, int64_t h, int64_t v_start,
                                       int64_t v_local, const TensorParallel& tp) {
  const float* d = dout;  // the all-reduce's backward is the identity
  if (tp.size() > 1 && tp.sequence_parallel) {  // the reduce-scatter's: an all-gather
    const int64_t slab = divide(n, tp.size(), "tokens by TP (sequence parallelism)");
    reduce_scatter_to_sp_region_backward(full, dout, slab * h, *tp.tp);
    d = full;
  }
  embedding_backward(dtable, d, ids, n, h, v_start, v_local);
}

}  // namespace mt
