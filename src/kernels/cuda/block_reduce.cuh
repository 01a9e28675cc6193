// Warp and block reductions of the row kernels (norms, cross-entropy). A xor
// butterfly adds the same two values in every lane, so every thread gets the
// same bits; blockDim.x must be a multiple of 32.
#pragma once
#include <cmath>

namespace mt::cuda {

template <class T>
__device__ __forceinline__ T warp_sum(T x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

// Sum over the block; every thread gets the result.
template <class T>
__device__ T block_sum(T x) {
  __shared__ T part[32];
  x = warp_sum(x);
  __syncthreads();  // an earlier call's readers are done with part
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = x;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  return warp_sum(lane < int(blockDim.x >> 5) ? part[lane] : T(0));
}

// Max over the block; every thread gets the result.
__device__ __forceinline__ float block_max(float x) {
  __shared__ float part[32];
  x = warp_max(x);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = x;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  return warp_max(lane < int(blockDim.x >> 5) ? part[lane] : -INFINITY);
}

}  // namespace mt::cuda
