// Tensor- and sequence-parallel communication mappings, named by their forward
// effect as Megatron-LM's mappings.py names them, each with its backward pair.
// Activations are sequence-first, so a sequence-parallel shard ("slab") is the
// contiguous rows [tp_rank·s/tp, (tp_rank+1)·s/tp) of an (s, b, ...) tensor:
// gathering and scattering along s are plain all-gather / reduce-scatter of
// contiguous chunks. `slab_n` is the element count of one slab.
#pragma once
#include <cstdint>

#include "comm/communicator.h"

namespace mt {

// copy_to_tp_region — fwd: identity; bwd: all-reduce(tp)
void copy_to_tp_region_backward(float* dx, int64_t n, const Communicator& tp);

// reduce_from_tp_region — fwd: all-reduce(tp); bwd: identity
void reduce_from_tp_region_forward(float* x, int64_t n, const Communicator& tp);

// gather_from_sequence_parallel_region — fwd: all-gather along s; bwd: reduce-scatter along s
void gather_from_sp_region_forward(uint16_t* full, const uint16_t* slab, int64_t slab_n,
                                   const Communicator& tp);  // a bf16 run's activations
void gather_from_sp_region_forward(float* full, const float* slab, int64_t slab_n,
                                   const Communicator& tp);
void gather_from_sp_region_backward(float* dslab, const float* dfull, int64_t slab_n,
                                    const Communicator& tp);

// reduce_scatter_to_sequence_parallel_region — fwd: reduce-scatter along s; bwd: all-gather along s
void reduce_scatter_to_sp_region_forward(float* slab, const float* full, int64_t slab_n,
                                         const Communicator& tp);
void reduce_scatter_to_sp_region_backward(float* dfull, const float* dslab, int64_t slab_n,
                                          const Communicator& tp);

// scatter_to_sequence_parallel_region — fwd: keep this rank's slab; bwd: all-gather along s
void scatter_to_sp_region_forward(float* slab, const float* full, int64_t slab_n,
                                  const Communicator& tp);
void scatter_to_sp_region_backward(float* dfull, const float* dslab, int64_t slab_n,
                                   const Communicator& tp);

}  // namespace mt
