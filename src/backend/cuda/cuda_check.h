// For CUDA sources only (src/backend/cuda, src/kernels/cuda): the stream every
// kernel runs on, and checked CUDA calls.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/error.h"

// MT_CUDA_CHECK(cudaMemcpy(...)): an error names the call, CUDA's message and where.
#define MT_CUDA_CHECK(call)                                                            \
  do {                                                                                 \
    const cudaError_t mt_err_ = (call);                                                \
    MT_CHECK(mt_err_ == cudaSuccess, #call, " failed: ", cudaGetErrorString(mt_err_)); \
  } while (0)
// After a kernel launch: a bad launch configuration is reported here.
#define MT_CUDA_LAUNCH_CHECK() MT_CUDA_CHECK(cudaGetLastError())

namespace mt::cuda {

// The one stream of this process's GPU work (created on first use, on the
// device chosen by the backend). Every twin launches on it, in order.
cudaStream_t stream();

// Blocks of `threads` covering n items.
inline unsigned blocks_for(int64_t n, int threads) {
  return unsigned((n + threads - 1) / threads);
}

}  // namespace mt::cuda
