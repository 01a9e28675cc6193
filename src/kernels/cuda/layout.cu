// Layout changes on the GPU, the same element maps as layout.cc. One block per
// sequence-first row (t, bi) (grid = s·b): the row's (s, b, ...) side is read
// or written contiguously, the (b, a, s, d) side in runs of d. With d a
// multiple of 4 and 16-byte aligned pointers the fp32 moves go as float4
// (D below is then d / 4 and every pointer a float4*). The group sums of
// heads_to_qkv add in head order, as the CPU: results are exact copies / the
// CPU's sums, bit for bit.
#include <cstdint>
#include <initializer_list>

#include "backend/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/layout.h"

namespace mt::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float add(float x, float y) { return x + y; }
__device__ __forceinline__ float4 add(float4 x, float4 y) {
  return make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
}

// Row (t, bi) = blockIdx.x of qkv (s, b, g, hpg + 2, D) → q, k, v (b, a, s, D).
template <class V>
__global__ void qkv_to_heads_kernel(V* q, V* k, V* v, const V* qkv, int64_t s, int64_t b, int a,
                                    int hpg, int g, int D) {
  const int64_t row = blockIdx.x, t = row / b, bi = row % b;
  const int width = (hpg + 2) * D, n = g * width;
  const V* src = qkv + row * n;
  for (int idx = threadIdx.x; idx < n; idx += blockDim.x) {
    const int gi = idx / width, rem = idx % width, part = rem / D, e = rem % D;
    const V val = src[idx];
    if (part < hpg) {
      const int64_t j = int64_t(gi) * hpg + part;
      q[((bi * a + j) * s + t) * D + e] = val;
    } else {
      V* dst = part == hpg ? k : v;  // the group's k or v, to each of its heads
      for (int i = 0; i < hpg; ++i) {
        const int64_t j = int64_t(gi) * hpg + i;
        dst[((bi * a + j) * s + t) * D + e] = val;
      }
    }
  }
}

// dq, dk, dv (b, a, s, D) → row (t, bi) of dqkv (s, b, g, hpg + 2, D).
template <class V>
__global__ void heads_to_qkv_kernel(V* dqkv, const V* dq, const V* dk, const V* dv, int64_t s,
                                    int64_t b, int a, int hpg, int g, int D) {
  const int64_t row = blockIdx.x, t = row / b, bi = row % b;
  const int width = (hpg + 2) * D, n = g * width;
  V* dst = dqkv + row * n;
  for (int idx = threadIdx.x; idx < n; idx += blockDim.x) {
    const int gi = idx / width, rem = idx % width, part = rem / D, e = rem % D;
    const int64_t j0 = int64_t(gi) * hpg;
    if (part < hpg) {
      dst[idx] = dq[((bi * a + j0 + part) * s + t) * D + e];
    } else {
      const V* src = part == hpg ? dk : dv;
      V acc = src[((bi * a + j0) * s + t) * D + e];
      for (int i = 1; i < hpg; ++i) acc = add(acc, src[((bi * a + j0 + i) * s + t) * D + e]);
      dst[idx] = acc;
    }
  }
}

// x (b, a, s, D) → row (t, bi) of out (s, b, a·D).
template <class To, class Ti>
__global__ void heads_to_sbh_kernel(To* out, const Ti* x, int64_t s, int64_t b, int a, int D) {
  const int64_t row = blockIdx.x, t = row / b, bi = row % b;
  const int n = a * D;
  for (int idx = threadIdx.x; idx < n; idx += blockDim.x) {
    const int j = idx / D, e = idx % D;
    const Ti val = x[((bi * a + j) * s + t) * D + e];
    if constexpr (sizeof(To) == 2)
      out[row * n + idx] = bf16_of(val);
    else
      out[row * n + idx] = val;
  }
}

// Row (t, bi) of x (s, b, a·D) → out (b, a, s, D).
template <class V>
__global__ void sbh_to_heads_kernel(V* out, const V* x, int64_t s, int64_t b, int a, int D) {
  const int64_t row = blockIdx.x, t = row / b, bi = row % b;
  const int n = a * D;
  for (int idx = threadIdx.x; idx < n; idx += blockDim.x) {
    const int j = idx / D, e = idx % D;
    out[((bi * a + j) * s + t) * D + e] = x[row * n + idx];
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Whether the fp32 moves may go as float4.
bool vec4(int64_t d, std::initializer_list<const void*> ptrs) {
  if (d % 4 != 0) return false;
  for (const void* p : ptrs)
    if (!aligned16(p)) return false;
  return true;
}

// Rows are blocks (grid.x <= 2^31 - 1); a row's elements are int indices.
void check_sizes(const char* who, int64_t s, int64_t b, int64_t row_elems) {
  MT_CHECK(s * b <= int64_t(INT32_MAX) && row_elems <= int64_t(INT32_MAX), who, ": s=", s, " b=", b,
           " with ", row_elems,
           " elements per row exceed the kernel's 32-bit grid / row indices; fix: split the call");
}

}  // namespace

void qkv_to_heads(float* q, float* k, float* v, const float* qkv, int64_t s, int64_t b, int64_t a,
                  int64_t g, int64_t d) {
  if (s <= 0 || b <= 0 || a <= 0 || d <= 0) return;
  const int64_t hpg = a / g;
  check_sizes("qkv_to_heads", s, b, (a + 2 * g) * d);
  const unsigned rows = unsigned(s * b);
  if (vec4(d, {q, k, v, qkv}))
    qkv_to_heads_kernel<<<rows, kThreads, 0, stream()>>>(
        reinterpret_cast<float4*>(q), reinterpret_cast<float4*>(k), reinterpret_cast<float4*>(v),
        reinterpret_cast<const float4*>(qkv), s, b, int(a), int(hpg), int(g), int(d / 4));
  else
    qkv_to_heads_kernel<<<rows, kThreads, 0, stream()>>>(q, k, v, qkv, s, b, int(a), int(hpg),
                                                         int(g), int(d));
  MT_CUDA_LAUNCH_CHECK();
}

void heads_to_qkv(float* dqkv, const float* dq, const float* dk, const float* dv, int64_t s,
                  int64_t b, int64_t a, int64_t g, int64_t d) {
  if (s <= 0 || b <= 0 || a <= 0 || d <= 0) return;
  const int64_t hpg = a / g;
  check_sizes("heads_to_qkv", s, b, (a + 2 * g) * d);
  const unsigned rows = unsigned(s * b);
  if (vec4(d, {dqkv, dq, dk, dv}))
    heads_to_qkv_kernel<<<rows, kThreads, 0, stream()>>>(
        reinterpret_cast<float4*>(dqkv), reinterpret_cast<const float4*>(dq),
        reinterpret_cast<const float4*>(dk), reinterpret_cast<const float4*>(dv), s, b, int(a),
        int(hpg), int(g), int(d / 4));
  else
    heads_to_qkv_kernel<<<rows, kThreads, 0, stream()>>>(dqkv, dq, dk, dv, s, b, int(a), int(hpg),
                                                         int(g), int(d));
  MT_CUDA_LAUNCH_CHECK();
}

void heads_to_sbh(WriteView out, const float* x, int64_t s, int64_t b, int64_t a, int64_t d) {
  if (s <= 0 || b <= 0 || a <= 0 || d <= 0) return;
  check_sizes("heads_to_sbh", s, b, a * d);
  const unsigned rows = unsigned(s * b);
  if (out.bf16)
    heads_to_sbh_kernel<<<rows, kThreads, 0, stream()>>>(out.bf16, x, s, b, int(a), int(d));
  else if (vec4(d, {out.f32, x}))
    heads_to_sbh_kernel<<<rows, kThreads, 0, stream()>>>(reinterpret_cast<float4*>(out.f32),
                                                         reinterpret_cast<const float4*>(x), s, b,
                                                         int(a), int(d / 4));
  else
    heads_to_sbh_kernel<<<rows, kThreads, 0, stream()>>>(out.f32, x, s, b, int(a), int(d));
  MT_CUDA_LAUNCH_CHECK();
}

void sbh_to_heads(float* out, const float* x, int64_t s, int64_t b, int64_t a, int64_t d) {
  if (s <= 0 || b <= 0 || a <= 0 || d <= 0) return;
  check_sizes("sbh_to_heads", s, b, a * d);
  const unsigned rows = unsigned(s * b);
  if (vec4(d, {out, x}))
    sbh_to_heads_kernel<<<rows, kThreads, 0, stream()>>>(reinterpret_cast<float4*>(out),
                                                         reinterpret_cast<const float4*>(x), s, b,
                                                         int(a), int(d / 4));
  else
    sbh_to_heads_kernel<<<rows, kThreads, 0, stream()>>>(out, x, s, b, int(a), int(d));
  MT_CUDA_LAUNCH_CHECK();
}

}  // namespace mt::cuda
