#include "parallel/mappings.h"

#include "backend/device.h"

namespace mt {

void copy_to_tp_region_backward(float* dx, int64_t n, const Communicator& tp) {
  tp.all_reduce_sum(dx, n);
}

void reduce_from_tp_region_forward(float* x, int64_t n, const Communicator& tp) {
  tp.all_reduce_sum(x, n);
}

void gather_from_sp_region_forward(float* full, const float* slab, int64_t slab_n,
                                   const Communicator& tp) {
  tp.all_gather(full, slab, slab_n);
}

void gather_from_sp_region_forward(uint16_t* full, const uint16_t* slab, int64_t slab_n,
                                   const Communicator& tp) {
  tp.all_gather(full, slab, slab_n);
}

void gather_from_sp_region_backward(float* dslab, const float* dfull, int64_t slab_n,
                                    const Communicator& tp) {
  tp.reduce_scatter_sum(dslab, dfull, slab_n);
}

void reduce_scatter_to_sp_region_forward(float* slab, const float* full, int64_t slab_n,
                                         const Communicator& tp) {
  tp.reduce_scatter_sum(slab, full, slab_n);
}

void reduce_scatter_to_sp_region_backward(float* dfull, const float* dslab, int64_t slab_n,
                                          const Communicator& tp) {
  tp.all_gather(dfull, dslab, slab_n);
}

void scatter_to_sp_region_forward(float* slab, const float* full, int64_t slab_n,
                                  const Communicator& tp) {
  copy_bytes(slab, full + int64_t(tp.rank()) * slab_n, size_t(slab_n) * sizeof(float));
}

void scatter_to_sp_region_backward(float* dfull, const float* dslab, int64_t slab_n,
                                   const Communicator& tp) {
  tp.all_gather(dfull, dslab, slab_n);
}

}  // namespace mt
