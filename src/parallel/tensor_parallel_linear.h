// Megatron's ColumnParallelLinear and RowParallelLinear as forward/backward
// function pairs over a TP group, with or without sequence parallelism.
//
// Column-parallel (QKV, FC1): W (out/tp, in) holds a block of output rows.
//   input: replicated (s, b, in), or with SP this rank's slab (s/tp, b, in),
//   all-gathered first (gather_from_sequence_parallel_region);
//   output: (s, b, out/tp), no communication (copy_to_tp_region: its
//   backward all-reduces the input gradient; with SP, a reduce-scatter).
// Row-parallel (attention projection, FC2): W (out, in/tp) holds a block of
//   input columns. input (s, b, in/tp); the partial products are all-reduced
//   (reduce_from_tp_region) or, with SP, reduce-scattered into this rank's
//   slab (s/tp, b, out); the bias is added once, after the reduction.
// `n` is the full token count s·b; slabs hold n/tp rows.
// `cm` (math mode) is passed to the linear kernels: the GEMMs run in cm.math;
// weights, biases, inputs and the column-parallel output are fp32 or (bf16
// runs) bf16 storage (a bf16 input is all-gathered in bf16 under SP, into the
// bytes of the fp32 `gathered` workspace); reductions and the bias add are fp32.
#pragma once
#include <cstdint>

#include "comm/communicator.h"
#include "kernels/precision.h"

namespace mt {

struct TensorParallel {
  const Communicator* tp = nullptr;  // size 1 → plain linear layers
  bool sequence_parallel = false;
  int64_t size() const { return tp ? tp->size() : 1; }
};

// out (n, out_local) = X · Wᵀ + b, X = input or, with SP, all-gather(input) into
// `gathered` (n, in) workspace.                                         [out: =]
void column_parallel_linear_forward(WriteView out, float* gathered, ReadView input,
                                    ReadView weight, ReadView bias, int64_t n, int64_t in,
                                    int64_t out_local, const TensorParallel& tp,
                                    const Compute& cm = {});
// dinput (n, in) replicated, or with SP (n/tp, in) slab               [=]
// dweight += doutᵀ X, dbias += Σ dout; `gathered` (n, in) and `dfull` (n, in) are workspaces
// (with SP the input is re-gathered; without, dfull may alias dinput).
// dout may be bf16 storage in bf16 math when there is no bias (linear_backward).
void column_parallel_linear_backward(float* dinput, float* dweight, float* dbias,
                                     float* gathered, float* dfull, ReadView dout,
                                     ReadView input, ReadView weight, int64_t n,
                                     int64_t in, int64_t out_local, const TensorParallel& tp,
                                     const Compute& cm = {});

// out (n, out) or with SP (n/tp, out) = reduce(input · Wᵀ) + b; `partial` (n, out)
// workspace (may alias out without SP).                                 [out: =]
void row_parallel_linear_forward(float* out, float* partial, ReadView input,
                                 ReadView weight, ReadView bias, int64_t n,
                                 int64_t in_local, int64_t out_features, const TensorParallel& tp,
                                 const Compute& cm = {});
// dout (n, out) or with SP (n/tp, out). dinput (n, in_local) [=]; dweight, dbias +=
// (with SP dbias is a partial sum over the slab: all-reduce it over TP after
// backward, as for LayerNorm weights). `dfull` (n, out) workspace for SP.
void row_parallel_linear_backward(float* dinput, float* dweight, float* dbias, float* dfull,
                                  const float* dout, ReadView input, ReadView weight,
                                  int64_t n, int64_t in_local, int64_t out_features,
                                  const TensorParallel& tp, const Compute& cm = {});

}  // namespace mt
