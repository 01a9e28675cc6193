// CUDA twins of src/kernels/matmul.h: matmul and the linear layers on
// cuBLASLt (matmul_util.h), bias kernels, and the GPU's peak-rate probe.
//
// matmul resolves the shape as the CPU does (0 = dense made explicit, same
// checks and messages), then hands cuBLASLt each operand as it should read
// it: fp32 as stored (kF32), the caller's bf16 shadow as stored, or a dense
// bf16/fp16 copy in grow-only scratch. A bf16 bias for an fp32 C is widened
// into scratch; an fp32 bias for a bf16 C (cuBLASLt wants the bias in C's
// type) makes the product go to fp32 scratch, rounded to bf16 after: one
// rounding either way, as on the CPU.
#include "kernels/cuda/matmul.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/device.h"
#include "core/error.h"
#include "kernels/cuda/matmul_util.h"

namespace mt::cuda {
namespace {

// The twins' scratch: grow-only GPU buffers, reused by every call that fits.
// The mutex keeps one call's conversions and products together in stream
// order; recursive because linear_backward holds it across its products.
// Never destroyed (see lt_state in matmul_util.cu).
struct Scratch {
  std::recursive_mutex mu;
  DeviceBuffer a, b;   // bf16/fp16 copies of fp32 operands
  DeviceBuffer bias;   // a bf16 bias widened to fp32
  DeviceBuffer c;      // fp32 C before its bf16 rounding (fp32 bias, bf16 C)
  DeviceBuffer dout;   // linear_backward: bf16 dout shared by both products
  DeviceBuffer colsum; // bias_backward: per-chunk column sums
};
Scratch& scratch() {
  static Scratch* s = new Scratch;
  return *s;
}

void* grown(DeviceBuffer& buf, size_t bytes) {
  if (buf.size() < bytes) buf = DeviceBuffer(Device::kCuda, bytes);
  return buf.data();
}

// Leading dims and batch strides made explicit; the CPU's checks (matmul.cc resolve()).
struct Strides {
  int64_t lda, ldb, ldc, bsa, bsb, bsc;
};
Strides resolve(const MatmulShape& s) {
  MT_CHECK(s.batch >= 1 && s.m >= 1 && s.n >= 1 && s.k >= 1,
           "matmul: sizes must be positive, got batch=", s.batch, " m=", s.m, " n=", s.n,
           " k=", s.k, "; fix: skip empty products in the caller");
  const int64_t a_rows = s.trans_a ? s.k : s.m, a_cols = s.trans_a ? s.m : s.k;
  const int64_t b_rows = s.trans_b ? s.n : s.k, b_cols = s.trans_b ? s.k : s.n;
  Strides r{};
  r.lda = s.lda ? s.lda : a_cols;
  r.ldb = s.ldb ? s.ldb : b_cols;
  r.ldc = s.ldc ? s.ldc : s.n;
  MT_CHECK(r.lda >= a_cols && r.ldb >= b_cols && r.ldc >= s.n,
           "matmul: leading dimension smaller than the stored row, lda=", r.lda, " (row ", a_cols,
           ") ldb=", r.ldb, " (row ", b_cols, ") ldc=", r.ldc, " (row ", s.n,
           "); fix: pass the row stride of the stored matrix, or 0 for dense");
  const bool one = s.batch == 1;
  r.bsa = (one || s.batch_stride_a == 0) ? a_rows * r.lda : s.batch_stride_a;
  r.bsb = (one || s.batch_stride_b == 0) ? b_rows * r.ldb : s.batch_stride_b;
  r.bsc = (one || s.batch_stride_c == 0) ? s.m * r.ldc : s.batch_stride_c;
  MT_CHECK(r.bsa > 0 && r.bsb > 0 && r.bsc > 0, "matmul: negative batch stride (a=", r.bsa,
           " b=", r.bsb, " c=", r.bsc, "); fix: pass 0 for dense");
  return r;
}

// An operand stored as `batch` (rows, cols) matrices, as cuBLASLt reads it in `math`.
LtOperand operand(const float* x, const uint16_t* x16, MathMode math, DeviceBuffer& buf,
                  int64_t batch, int64_t rows, int64_t cols, int64_t ld, int64_t bs) {
  if (math == MathMode::kF32) return {x, LtType::kF32, ld, bs};
  if (math == MathMode::kBF16 && x16 != nullptr) return {x16, LtType::kBF16, ld, bs};
  const bool bf16 = math == MathMode::kBF16;
  auto* dst = static_cast<uint16_t*>(grown(buf, size_t(batch * rows * cols) * sizeof(uint16_t)));
  pack_low_precision(dst, bf16, x, batch, rows, cols, ld, bs);
  return {dst, bf16 ? LtType::kBF16 : LtType::kF16, cols, rows * cols};
}

constexpr int kThreads = 256;

// x (n, c) += bias (c): block rows over x's rows (grid-stride), threads along a row.
template <class T>
__global__ void bias_add_kernel(float* x, const T* bias, int64_t n, int64_t c) {
  for (int64_t r = blockIdx.y; r < n; r += gridDim.y) {
    float* row = x + r * c;
    for (int64_t j = int64_t(blockIdx.x) * kThreads + threadIdx.x; j < c;
         j += int64_t(gridDim.x) * kThreads) {
      if constexpr (sizeof(T) == 2)
        row[j] += __uint_as_float(uint32_t(bias[j]) << 16);
      else
        row[j] += bias[j];
    }
  }
}

// Column sums in two deterministic passes. Pass 1: block (32 columns, 8 row
// lanes) sums rows [y·rows_per_chunk, …) of its 32 columns, each lane every
// 8th row, the 8 lanes then in order, into partial (chunks, c).
constexpr int kColTile = 32, kRowLanes = 8;
__global__ void column_partials_kernel(float* partial, const float* dout, int64_t n, int64_t c,
                                       int64_t rows_per_chunk) {
  __shared__ float acc[kRowLanes][kColTile];
  const int64_t col = int64_t(blockIdx.x) * kColTile + threadIdx.x;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = min(n, r0 + rows_per_chunk);
  float sum = 0.f;
  if (col < c)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) sum += dout[r * c + col];
  acc[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < c) {
    float t = 0.f;
    for (int i = 0; i < kRowLanes; ++i) t += acc[i][threadIdx.x];
    partial[int64_t(blockIdx.y) * c + col] = t;
  }
}
// Pass 2: dbias[col] += the chunks' partial sums, in double: block (32
// columns, 16 chunk lanes); lane y adds chunks y, y + 16, ... in order, then
// the lanes are added in a fixed tree (the same bits on every run; c/32
// blocks of short loops instead of one thread walking every chunk).
// Predicted (n=8192, c=768..3072): ~3 us per call, launch-bound (was ~17 us).
constexpr int kFinishLanes = 16;
__global__ void column_finish_kernel(float* dbias, const float* partial, int64_t chunks,
                                     int64_t c) {
  __shared__ double acc[kFinishLanes][kColTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t col = int64_t(blockIdx.x) * kColTile + tx;
  double t = 0.0;
  if (col < c) {
#pragma unroll 4
    for (int64_t ch = ty; ch < chunks; ch += kFinishLanes) t += double(partial[ch * c + col]);
  }
  acc[ty][tx] = t;
  for (int h = kFinishLanes / 2; h > 0; h >>= 1) {
    __syncthreads();  // lanes [h, 2h) wrote their sums
    if (ty < h) acc[ty][tx] += acc[ty + h][tx];
  }
  if (ty == 0 && col < c) dbias[col] += float(acc[0][tx]);
}

void check_weight_math(ReadView x, const Compute& cm) {
  MT_CHECK(x.bf16 == nullptr || cm.math == MathMode::kBF16, "linear: a bf16-stored operand in ",
           math_mode_name(cm.math), " math (internal error: bf16 storage belongs to --bf16 runs)");
}

}  // namespace

void matmul(WriteView c_out, const float* a, const float* b, ReadView bias_ref,
            const MatmulShape& s, const uint16_t* b_bf16, const uint16_t* a_bf16) {
  const bool bf16 = s.math == MathMode::kBF16;
  MT_CHECK(!c_out.bf16 || (bf16 && !s.accumulate && (s.ldc == 0 || s.ldc == s.n) &&
                           (s.batch == 1 || s.batch_stride_c == 0)),
           "matmul: a bf16 C needs bf16 math, no accumulation and dense C (internal error)");
  const bool use_a_bf16 = bf16 && a_bf16 != nullptr, use_b_bf16 = bf16 && b_bf16 != nullptr;
  MT_CHECK(c_out && (a || use_a_bf16) && (b || use_b_bf16), "matmul: null pointer (c=",
           c_out.raw(), " a=", a, " b=", b, " a_bf16=", a_bf16, " b_bf16=", b_bf16,
           " math=", math_mode_name(s.math),
           "); fix: pass allocated buffers (a, b may be null only with their bf16 twin in bf16)");
  const Strides r = resolve(s);
  Scratch& sc = scratch();
  std::lock_guard<std::recursive_mutex> lock(sc.mu);

  LtProduct p;
  p.batch = s.batch;
  p.m = s.m;
  p.n = s.n;
  p.k = s.k;
  p.trans_a = s.trans_a;
  p.trans_b = s.trans_b;
  p.a = operand(a, use_a_bf16 ? a_bf16 : nullptr, s.math, sc.a, s.batch, s.trans_a ? s.k : s.m,
                s.trans_a ? s.m : s.k, r.lda, r.bsa);
  p.b = operand(b, use_b_bf16 ? b_bf16 : nullptr, s.math, sc.b, s.batch, s.trans_b ? s.n : s.k,
                s.trans_b ? s.k : s.n, r.ldb, r.bsb);
  p.accumulate = s.accumulate;
  p.tf32 = tf32_allowed();
  p.ldc = r.ldc;
  p.bsc = r.bsc;
  uint16_t* round_into = nullptr;  // bf16 C computed in fp32 scratch first
  if (c_out.bf16 && bias_ref.f32 == nullptr) {
    p.c = c_out.bf16;  // the bias (if any) is bf16 too: cuBLASLt adds it in fp32, rounds once
    p.c_type = LtType::kBF16;
    p.bias = bias_ref.bf16;
  } else if (c_out.bf16) {
    p.c = grown(sc.c, size_t(s.batch * s.m * s.n) * sizeof(float));  // dense, as C is
    p.c_type = LtType::kF32;
    p.bias = bias_ref.f32;
    round_into = c_out.bf16;
  } else {
    p.c = c_out.f32;
    p.c_type = LtType::kF32;
    p.bias = bias_ref.f32;
    if (bias_ref.bf16) {  // a bf16 model's bias for an fp32 C: widened (exact)
      auto* wide = static_cast<float*>(grown(sc.bias, size_t(s.n) * sizeof(float)));
      widen_bf16(wide, bias_ref.bf16, s.n);
      p.bias = wide;
    }
  }
  lt_matmul(p);
  if (round_into) round_bf16(round_into, static_cast<const float*>(p.c), s.batch * s.m * s.n);
}

void linear_forward(WriteView out, ReadView inp, ReadView weight, ReadView bias, int64_t n,
                    int64_t in, int64_t out_features, const Compute& cm) {
  check_weight_math(weight, cm);
  check_weight_math(inp, cm);
  // out (n, out) = inp (n, in) · W (out, in)ᵀ + bias
  MatmulShape s;
  s.m = n;
  s.n = out_features;
  s.k = in;
  s.trans_b = true;
  s.math = cm.math;
  cuda::matmul(out, inp.f32, weight.f32, bias, s, weight.bf16, inp.bf16);
}

void linear_backward(float* dinp, float* dweight, float* dbias, ReadView dout_in, ReadView inp,
                     ReadView weight, int64_t n, int64_t in, int64_t out_features,
                     bool accumulate_dinp, const Compute& cm) {
  check_weight_math(weight, cm);
  check_weight_math(inp, cm);
  check_weight_math(dout_in, cm);
  MT_CHECK(dout_in && (dbias == nullptr || dout_in.f32 != nullptr),
           "linear_backward: dout is null, or bf16 with a bias gradient to sum; fix: pass an "
           "fp32 dout when the layer has a bias");
  const float* dout = dout_in.f32;
  const uint16_t* dout16 = dout_in.bf16;
  Scratch& sc = scratch();
  std::lock_guard<std::recursive_mutex> lock(sc.mu);
  if (cm.math == MathMode::kBF16 && dinp && dweight && dout16 == nullptr) {
    // bf16: round dout once for both products (the same values each would make)
    auto* buf = static_cast<uint16_t*>(
        grown(sc.dout, size_t(n * out_features) * sizeof(uint16_t)));
    round_bf16(buf, dout, n * out_features);
    dout16 = buf;
  }
  if (dinp) {
    // dinp (n, in) = dout (n, out) · W (out, in)   [= or +=]
    MatmulShape s;
    s.m = n;
    s.n = in;
    s.k = out_features;
    s.accumulate = accumulate_dinp;
    s.math = cm.math;
    cuda::matmul(dinp, dout, weight.f32, nullptr, s, weight.bf16, dout16);
  }
  if (dweight) {
    // dweight (out, in) += dout (n, out)ᵀ · inp (n, in), into the fp32 gradient
    MatmulShape s;
    s.m = out_features;
    s.n = in;
    s.k = n;
    s.trans_a = true;
    s.accumulate = true;
    s.math = cm.math;
    cuda::matmul(dweight, dout, inp.f32, nullptr, s, inp.bf16, dout16);
  }
  if (dbias) cuda::bias_backward(dbias, dout, n, out_features);  // fp32
}

void bias_add(float* x, ReadView bias, int64_t n, int64_t c) {
  if (n <= 0 || c <= 0) return;
  const dim3 grid(std::min(blocks_for(c, kThreads), 64u), unsigned(std::min<int64_t>(n, 65535)));
  if (bias.bf16)
    bias_add_kernel<<<grid, kThreads, 0, stream()>>>(x, bias.bf16, n, c);
  else
    bias_add_kernel<<<grid, kThreads, 0, stream()>>>(x, bias.f32, n, c);
  MT_CUDA_LAUNCH_CHECK();
}

void bias_backward(float* dbias, const float* dout, int64_t n, int64_t c) {
  if (n <= 0 || c <= 0) return;
  // ~64 rows per chunk, at most 256 chunks: enough blocks for the GPU, a
  // partial array of at most 256 rows. Depends on (n, c) only: deterministic.
  const int64_t chunks = std::clamp<int64_t>((n + 63) / 64, 1, 256);
  const int64_t rows_per_chunk = (n + chunks - 1) / chunks;
  Scratch& sc = scratch();
  std::lock_guard<std::recursive_mutex> lock(sc.mu);
  auto* partial = static_cast<float*>(grown(sc.colsum, size_t(chunks * c) * sizeof(float)));
  const dim3 grid1(unsigned((c + kColTile - 1) / kColTile), unsigned(chunks));
  column_partials_kernel<<<grid1, dim3(kColTile, kRowLanes), 0, stream()>>>(partial, dout, n, c,
                                                                            rows_per_chunk);
  MT_CUDA_LAUNCH_CHECK();
  column_finish_kernel<<<unsigned((c + kColTile - 1) / kColTile), dim3(kColTile, kFinishLanes), 0,
                         stream()>>>(dbias, partial, chunks, c);
  MT_CUDA_LAUNCH_CHECK();
}

double measure_matmul_peak_flops(int64_t size, MathMode math) {
  MT_CHECK(size >= 64, "measure_matmul_peak_flops: size ", size,
           " is too small to measure a peak; fix: use >= 64 (default 2048)");
  const int64_t nel = size * size;
  std::vector<float> host_a(static_cast<size_t>(nel)), host_b(static_cast<size_t>(nel));
  for (int64_t i = 0; i < nel; ++i) {
    host_a[size_t(i)] = float(i % 13) * 0.01f;
    host_b[size_t(i)] = float(i % 7) * 0.02f;
  }
  DeviceBuffer a(Device::kCuda, size_t(nel) * sizeof(float));
  DeviceBuffer b(Device::kCuda, size_t(nel) * sizeof(float));
  DeviceBuffer c(Device::kCuda, size_t(nel) * sizeof(float));
  copy_bytes(a.data(), host_a.data(), size_t(nel) * sizeof(float));
  copy_bytes(b.data(), host_b.data(), size_t(nel) * sizeof(float));
  // Low-precision operands converted before timing: the rate of the GEMM itself.
  DeviceBuffer a16, b16;
  LtProduct p;
  p.m = p.n = p.k = size;
  p.c = c.data();
  p.ldc = size;
  p.tf32 = tf32_allowed();
  if (math == MathMode::kF32) {
    p.a = {a.data(), LtType::kF32, size, nel};
    p.b = {b.data(), LtType::kF32, size, nel};
  } else {
    p.a = operand(a.as<float>(), nullptr, math, a16, 1, size, size, size, nel);
    p.b = operand(b.as<float>(), nullptr, math, b16, 1, size, size, size, nel);
  }
  lt_matmul(p);  // warm-up: plan, algorithm, clocks
  lt_matmul(p);
  MT_CUDA_CHECK(cudaStreamSynchronize(stream()));
  cudaEvent_t start = nullptr, stop = nullptr;
  MT_CUDA_CHECK(cudaEventCreate(&start));
  MT_CUDA_CHECK(cudaEventCreate(&stop));
  constexpr int kPerRun = 10;  // products per timed run (one is ~10 µs at 2048 in bf16)
  const double flop = 2.0 * double(size) * double(size) * double(size) * kPerRun;
  double best = 0, total = 0;
  for (int rep = 0; rep < 5 || (total < 0.25 && rep < 200); ++rep) {
    MT_CUDA_CHECK(cudaEventRecord(start, stream()));
    for (int i = 0; i < kPerRun; ++i) lt_matmul(p);
    MT_CUDA_CHECK(cudaEventRecord(stop, stream()));
    MT_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.f;
    MT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    const double sec = double(ms) * 1e-3;
    if (sec > 0) best = std::max(best, flop / sec);
    total += sec;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

int64_t matmul_plan_count() { return lt_plan_count(); }

}  // namespace mt::cuda
