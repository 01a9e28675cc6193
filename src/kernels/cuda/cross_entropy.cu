// Softmax cross-entropy on the GPU, the function of cross_entropy.cc: one
// block per row for every phase. Two reads of a row instead of three: an
// online pass keeps, per thread, the running max m of its columns and
// s = Σ expf(z_j - m) (rescaled by exp(m_old - m_new), in double, when m
// grows); the block then takes the row max M and sum_exp = Σ_threads
// s·exp(m - M) (double, a fixed warp-shuffle tree). The gradient pass reads the
// row again. The sums are double over fp32 exponentials of arguments no larger
// in magnitude than the CPU's, so losses agree with the CPU to ~1e-7 relative
// (CUDA's expf and the CPU's exp_f32 differ by a few ulp).
// Threads take columns in quads (thread t: quads t, t + B, ...; float4 loads
// where the row is 16-byte aligned, the same arithmetic otherwise). The phases
// run the same per-thread accumulation with the same block size (shard_sums
// rescales to the given row max), so for the same v the fused rows and the
// phases give the same bits, as on the CPU.
// Predicted (b=8, s=1024, v=50304, bf16 gradient): pass 1 reads 1.65 GB, pass 2
// reads 1.65 GB, writes the kept exponentials (1.65 GB) and the bf16 gradient
// (0.82 GB): 5.8 GB → ~2.0 ms at 2.9 TB/s (was 7.4 GB, 3.2 ms); fp32 in place
// 4.9 GB → ~1.7 ms.
//
// check_targets reads the targets on the GPU: one block finds the first bad
// row (a fixed reduction) and the host reads it back (a synchronisation) to
// raise the CPU's error. Targets on the host are copied to the GPU.
#include "kernels/cuda/cross_entropy.h"

#include <climits>
#include <cmath>
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/device.h"
#include "core/error.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/device_math.cuh"

namespace mt::cuda {

namespace {

// Threads of a row block (at most kMaxThreads); a function of the row length
// only, so the fused rows and the phases (same v) reduce in the same order.
int row_threads(int64_t v) { return v >= 4096 ? 512 : 256; }

// Grow-only scratch (reused across calls): `bytes` of GPU memory.
char* grown(DeviceBuffer& buf, size_t bytes) {
  if (buf.size() < bytes) buf = DeviceBuffer(Device::kCuda, bytes);
  return buf.data();
}

// Targets on the GPU: the caller's, or a copy of host targets.
const int32_t* gpu_targets(const int32_t* targets, int64_t n) {
  if (n == 0 || on_device(targets)) return targets;
  static DeviceBuffer staged;
  auto* dst = reinterpret_cast<int32_t*>(grown(staged, size_t(n) * sizeof(int32_t)));
  copy_bytes(dst, targets, size_t(n) * sizeof(int32_t));
  return dst;
}


// ---- one row, by the whole block -------------------------------------------
// Thread t takes quads q = t, t + B, ... (columns 4q .. 4q + 3, the last quad
// cut at v) in every pass, kLoads quads loaded before any is used (loads in
// flight). The arithmetic per column does not depend on how a quad was loaded.

constexpr int kLoads = 4;
// Row blocks have at most kMaxThreads threads (row_threads); registers for
// kMinBlocks of them per SM, so one row's reductions overlap another's loads.
constexpr int kMaxThreads = 512, kMinBlocks = 2;

// Whether a row's quads move as one 16-byte (fp32) or 8-byte (bf16) access.
__device__ __forceinline__ bool quads_aligned(const float* p, int64_t v) {
  return (v & 3) == 0 && (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}
__device__ __forceinline__ bool quads_aligned(const uint16_t* p, int64_t v) {
  return (v & 3) == 0 && (reinterpret_cast<uintptr_t>(p) & 7) == 0;
}

// Columns j .. j + 3 of z (j = 4q < v); columns at or past v read as -inf.
__device__ __forceinline__ float4 load_quad(const float* z, int64_t j, int64_t v, bool vec) {
  if (vec) return *reinterpret_cast<const float4*>(z + j);
  float4 x;
  x.x = z[j];
  x.y = j + 1 < v ? z[j + 1] : -INFINITY;
  x.z = j + 2 < v ? z[j + 2] : -INFINITY;
  x.w = j + 3 < v ? z[j + 3] : -INFINITY;
  return x;
}

// Columns j .. j + 3 of p = x (those below v), bf16 rounded as st_f32.
__device__ __forceinline__ void store_quad(float* p, int64_t j, int64_t v, bool vec, float4 x) {
  if (vec) {
    *reinterpret_cast<float4*>(p + j) = x;
    return;
  }
  p[j] = x.x;
  if (j + 1 < v) p[j + 1] = x.y;
  if (j + 2 < v) p[j + 2] = x.z;
  if (j + 3 < v) p[j + 3] = x.w;
}
__device__ __forceinline__ void store_quad(uint16_t* p, int64_t j, int64_t v, bool vec,
                                           float4 x) {
  if (vec) {  // little-endian: column j in the low half
    uint2 w;
    w.x = uint32_t(bf16_of(x.x)) | (uint32_t(bf16_of(x.y)) << 16);
    w.y = uint32_t(bf16_of(x.z)) | (uint32_t(bf16_of(x.w)) << 16);
    *reinterpret_cast<uint2*>(p + j) = w;
    return;
  }
  p[j] = bf16_of(x.x);
  if (j + 1 < v) p[j + 1] = bf16_of(x.y);
  if (j + 2 < v) p[j + 2] = bf16_of(x.z);
  if (j + 3 < v) p[j + 3] = bf16_of(x.w);
}

__device__ __forceinline__ float quad_get(const float4& x, int64_t k) {
  return k == 0 ? x.x : k == 1 ? x.y : k == 2 ? x.z : x.w;
}
__device__ __forceinline__ float quad_max(const float4& x) {
  return fmaxf(fmaxf(x.x, x.y), fmaxf(x.z, x.w));
}

// A thread's share of a row: the max m of its columns (raised only by a
// larger quad max, the same rule in every kernel) and s = Σ expf(z_j - m).
struct Online {
  float m = -INFINITY;
  double s = 0.0;
};

// expf(x - m), 0 for x = -inf (also while m is still -inf).
__device__ __forceinline__ float exp_from(float x, float m) {
  return x == -INFINITY ? 0.f : expf(x - m);
}

// Adds a quad. The _rn intrinsics keep the rescale and the add two roundings
// in every kernel (no fused multiply-add), so all kernels give the same bits.
__device__ __forceinline__ void add_quad(Online& a, const float4& x) {
  const float mq = quad_max(x);
  if (mq > a.m) {  // the max grew: rescale (s is 0 while m is -inf: exp(-inf) = 0)
    a.s = __dmul_rn(a.s, exp(double(a.m) - double(mq)));
    a.m = mq;
  }
  const float part = (exp_from(x.x, a.m) + exp_from(x.y, a.m)) +
                     (exp_from(x.z, a.m) + exp_from(x.w, a.m));
  a.s = __dadd_rn(a.s, double(part));
}

// Pass 1 over row z: the thread's Online share; the thread holding column t
// (0 <= t < v) writes z_t to *z_t; with keep, z_j = expf(z_j - mx) (mx given).
__device__ Online accumulate_row(float* z, int64_t v, int64_t t, float* z_t, bool keep,
                                 float mx) {
  const int64_t nq = (v + 3) >> 2, stride = blockDim.x;
  const bool vec = quads_aligned(z, v);
  const int64_t tq = (t >= 0 && t < v) ? (t >> 2) : -1;
  Online a;
  for (int64_t q0 = threadIdx.x; q0 < nq; q0 += kLoads * stride) {
    float4 x[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int64_t q = q0 + u * stride;
      x[u] = q < nq ? load_quad(z, 4 * q, v, vec) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int64_t q = q0 + u * stride;
      if (q >= nq) break;
      add_quad(a, x[u]);
      if (q == tq) *z_t = quad_get(x[u], t & 3);
      if (keep) {
        const float4 e = make_float4(expf(x[u].x - mx), expf(x[u].y - mx), expf(x[u].z - mx),
                                     expf(x[u].w - mx));
        store_quad(z, 4 * q, v, vec, e);
      }
    }
  }
  return a;
}

// sum_exp = Σ_threads s·exp(m - mx) (double, a fixed tree), in every thread.
__device__ double block_sum_exp(const Online& a, float mx) {
  const double part = a.s == 0.0 ? 0.0 : __dmul_rn(a.s, exp(double(a.m) - double(mx)));
  return block_sum(part);
}

// Pass 2: e_j = expf(z_j - mx) with recompute, else z_j (z holds the
// exponentials); keep_to_j = e_j when keep_to is set; g_j = grad_scale *
// (e_j / sum_exp - [j == t]) with the CPU's two roundings (_rn: no fused
// multiply-add). g may be z (fp32, in place: each thread reads its quads
// before it writes them) or bf16 storage.
template <class T>
__device__ void grad_row(T* g, const float* z, float* keep_to, int64_t v, int64_t t, float mx,
                         double sum_exp, float grad_scale, bool recompute) {
  const float mul = float(double(grad_scale) / sum_exp);
  const int64_t nq = (v + 3) >> 2, stride = blockDim.x;
  const bool zvec = quads_aligned(z, v), gvec = quads_aligned(g, v);
  for (int64_t q0 = threadIdx.x; q0 < nq; q0 += kLoads * stride) {
    float4 x[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int64_t q = q0 + u * stride;
      x[u] = q < nq ? load_quad(z, 4 * q, v, zvec) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int64_t q = q0 + u * stride, j = 4 * q;
      if (q >= nq) break;
      float4 e = x[u];
      if (recompute)
        e = make_float4(expf(e.x - mx), expf(e.y - mx), expf(e.z - mx), expf(e.w - mx));
      if (keep_to) store_quad(keep_to, j, v, zvec, e);
      float4 p = make_float4(__fmul_rn(e.x, mul), __fmul_rn(e.y, mul), __fmul_rn(e.z, mul),
                             __fmul_rn(e.w, mul));
      if (j == t) p.x = __fsub_rn(p.x, grad_scale);
      if (j + 1 == t) p.y = __fsub_rn(p.y, grad_scale);
      if (j + 2 == t) p.z = __fsub_rn(p.z, grad_scale);
      if (j + 3 == t) p.w = __fsub_rn(p.w, grad_scale);
      store_quad(g, j, v, gvec, p);
    }
  }
}

// ---- kernels ----------------------------------------------------------------

__global__ void __launch_bounds__(kMaxThreads, kMinBlocks)
    max_kernel(float* row_max_out, const float* logits, int64_t v) {
  const float* z = logits + int64_t(blockIdx.x) * v;
  const int64_t nq = (v + 3) >> 2;
  const bool vec = quads_aligned(z, v);
  float m = -INFINITY;
  for (int64_t q = threadIdx.x; q < nq; q += blockDim.x) {
    const float mq = quad_max(load_quad(z, 4 * q, v, vec));
    if (mq > m) m = mq;  // add_quad's rule: the same bits as the fused row's max
  }
  m = block_max(m);
  if (threadIdx.x == 0) row_max_out[blockIdx.x] = m;
}

__global__ void __launch_bounds__(kMaxThreads, kMinBlocks)
    sums_kernel(double* sum_exp, double* target_logit, float* logits, const float* row_max_in,
                const int32_t* targets, int64_t v, int64_t v_start, bool keep_exp) {
  __shared__ float z_t;
  const int64_t i = blockIdx.x;
  const int64_t t = int64_t(targets[i]) - v_start;
  const float mx = row_max_in[i];
  const Online a = accumulate_row(logits + i * v, v, t, &z_t, keep_exp, mx);
  const double sum = block_sum_exp(a, mx);  // its barriers publish z_t
  if (threadIdx.x == 0) {
    sum_exp[i] = sum;
    target_logit[i] = (t >= 0 && t < v) ? double(z_t - mx) : 0.0;
  }
}

template <class T>
__global__ void __launch_bounds__(kMaxThreads, kMinBlocks)
    finish_kernel(float* losses, T* grad, const float* logits, const double* sum_exp,
                  const double* target_logit, const int32_t* targets, int64_t v,
                  int64_t v_start, float grad_scale) {
  const int64_t i = blockIdx.x;
  if (threadIdx.x == 0) losses[i] = float(log(sum_exp[i]) - target_logit[i]);
  if (grad_scale == 0.f) return;
  grad_row(grad + i * v, logits + i * v, nullptr, v, int64_t(targets[i]) - v_start, 0.f,
           sum_exp[i], grad_scale, false);
}

// The fused row: pass 1 (max and sum online), then the gradient pass, which
// computes the exponentials again (and keeps them in the logits when the
// gradient goes elsewhere); the logits end as the gradient in place.
template <class T>
__global__ void __launch_bounds__(kMaxThreads, kMinBlocks)
    rows_kernel(float* losses, float* logits, T* grad, const int32_t* targets, int64_t v,
                float grad_scale) {
  __shared__ float z_t;
  const int64_t i = blockIdx.x;
  float* z = logits + i * v;
  const int64_t t = targets[i];
  const Online a = accumulate_row(z, v, t, &z_t, false, 0.f);
  const float mx = block_max(a.m);
  const double sum = block_sum_exp(a, mx);  // its barriers publish z_t
  const double target = (t >= 0 && t < v) ? double(z_t - mx) : 0.0;
  if (threadIdx.x == 0) losses[i] = float(log(sum) - target);
  if (grad_scale == 0.f) return;
  const bool in_place = static_cast<const void*>(grad) == static_cast<const void*>(logits);
  grad_row(grad + i * v, z, in_place ? nullptr : z, v, t, mx, sum, grad_scale, true);
}

// found[0] = the first row whose target is outside [0, v) (n if none), found[1]
// its target. One block; each thread's first hit is its smallest, then a min.
__global__ void first_bad_kernel(long long* found, const int32_t* targets, int64_t n,
                                 int64_t v) {
  __shared__ long long part[32];
  long long first = n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    if (targets[i] < 0 || targets[i] >= v) {
      first = i;
      break;
    }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) first = min(first, __shfl_xor_sync(0xffffffffu, first, o));
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = first;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < int(blockDim.x >> 5); ++w) first = min(first, part[w]);
    found[0] = first;
    found[1] = first < n ? targets[first] : 0;
  }
}

void check_rows(int64_t n) {
  MT_CHECK(n <= INT_MAX, "cross-entropy (cuda): n=", n,
           " rows are above the GPU kernel's 2^31 - 1; fix: a smaller batch, or --device cpu");
}

}  // namespace

// row_max (n) = max over the shard's columns                          [=]
void cross_entropy_shard_max(float* row_max_out, const float* logits, int64_t n,
                             int64_t v_local) {
  if (n <= 0) return;
  check_rows(n);
  max_kernel<<<unsigned(n), row_threads(v_local), 0, stream()>>>(row_max_out, logits, v_local);
  MT_CUDA_LAUNCH_CHECK();
}

// sum_exp (n) =, target_logit (n) =; with keep_exp logits = exp(logits - row_max)
void cross_entropy_shard_sums(double* sum_exp, double* target_logit, float* logits,
                              const float* row_max_in, const int32_t* targets, int64_t n,
                              int64_t v_local, int64_t v_start, bool keep_exp) {
  if (n <= 0) return;
  check_rows(n);
  const int32_t* t = gpu_targets(targets, n);
  sums_kernel<<<unsigned(n), row_threads(v_local), 0, stream()>>>(
      sum_exp, target_logit, logits, row_max_in, t, v_local, v_start, keep_exp);
  MT_CUDA_LAUNCH_CHECK();
}

// losses (n) =; grad (n, v_local) = grad_scale * (softmax - onehot) when grad_scale != 0
void cross_entropy_shard_finish(float* losses, WriteView grad, const float* logits,
                                const double* sum_exp, const double* target_logit,
                                const int32_t* targets, int64_t n, int64_t v_local,
                                int64_t v_start, float grad_scale) {
  if (n <= 0) return;
  check_rows(n);
  const int32_t* t = gpu_targets(targets, n);
  visit(grad, [&](auto* g) {
    finish_kernel<<<unsigned(n), row_threads(v_local), 0, stream()>>>(
        losses, g, logits, sum_exp, target_logit, t, v_local, v_start, grad_scale);
  });
  MT_CUDA_LAUNCH_CHECK();
}

// losses (n) =; logits (n, v) = exponentials and grad (n, v) = when grad_scale != 0
void cross_entropy_rows(float* losses, float* logits, WriteView grad, const int32_t* targets,
                        int64_t n, int64_t v, float grad_scale) {
  if (n <= 0) return;
  check_rows(n);
  const int32_t* t = gpu_targets(targets, n);
  visit(grad, [&](auto* g) {
    rows_kernel<<<unsigned(n), row_threads(v), 0, stream()>>>(losses, logits, g, t, v,
                                                              grad_scale);
  });
  MT_CUDA_LAUNCH_CHECK();
}

// Checks every target is in [0, v); the error names the id, row and v (the first bad row).
void check_targets(const int32_t* targets, int64_t n, int64_t v) {
  if (n <= 0) return;
  const int32_t* t = gpu_targets(targets, n);
  static DeviceBuffer flag;
  auto* found = reinterpret_cast<long long*>(grown(flag, 2 * sizeof(long long)));
  first_bad_kernel<<<1, 1024, 0, stream()>>>(found, t, n, v);
  MT_CUDA_LAUNCH_CHECK();
  long long host[2] = {0, 0};
  copy_bytes(host, found, sizeof host);  // waits for the kernel
  const int64_t i = host[0];
  MT_CHECK(i >= n, "cross-entropy: target id ", int32_t(host[1]), " at row ", i,
           " is outside [0, ", v,
           "); fix: check the dataset's token ids against the model's vocab size");
}

// losses (n) = -log softmax(logits)[target]; logits = the gradient in place when grad_scale != 0
void softmax_cross_entropy(float* losses, float* logits, const int32_t* targets, int64_t n,
                           int64_t v, float grad_scale) {
  MT_CHECK(n >= 0 && v > 0, "softmax_cross_entropy: bad shape n=", n, " v=", v,
           "; fix: pass the row count and a positive vocabulary size");
  const int32_t* t = gpu_targets(targets, n);
  check_targets(t, n, v);
  cross_entropy_rows(losses, logits, logits, t, n, v, grad_scale);
}

}  // namespace mt::cuda
