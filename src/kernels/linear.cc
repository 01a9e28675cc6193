// The linear layers on matmul (kernels/matmul.h declares them): forward,
// backward (fp32 gradients of a small layer side by side on two threads, on
// dnnl_sgemm), the grouped (MoE experts') layers, bias add and bias gradient.
#include <omp.h>

#include <algorithm>
#include <mutex>

#include "backend/device.h"
#include "core/arena.h"
#include "core/error.h"
#include "kernels/cuda/matmul.h"
#include "kernels/matmul.h"
#include "kernels/sgemm_call.h"

namespace mt {

namespace {

// linear_backward's bf16 dout, shared by both products: grown to the largest
// layer's, then reused.
struct DoutScratch {
  std::mutex mu;
  HostBuffer buf;
};
DoutScratch& dout_scratch() {
  static DoutScratch s;
  return s;
}

// dbias (c) += column sums of dout (n, c); with out16, also out16 = bf16 of
// dout, from the same read. Threads own disjoint column chunks and sum their
// rows in order, so the result does not depend on the thread count.
void column_sums(float* dbias, uint16_t* out16, const float* dout, int64_t n, int64_t c) {
  constexpr int64_t kChunk = 64;
  const int64_t chunks = (c + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t c0 = ch * kChunk, w = std::min(kChunk, c - c0);
    float acc[kChunk] = {};
    for (int64_t r = 0; r < n; ++r) {
      const float* row = dout + r * c + c0;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) acc[j] += row[j];
      if (out16 != nullptr) {
        uint16_t* o = out16 + r * c + c0;
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) o[j] = bf16_from_f32(row[j]);
      }
    }
    for (int64_t j = 0; j < w; ++j) dbias[c0 + j] += acc[j];
  }
}

// fp32 on two threads: a layer's input and weight gradients, which take the
// sgemm route (sgemm_route), each on one thread side by side instead of one
// after the other on both. Split over two threads, a product of config (a)'s
// size (~0.1 GFLOP) spends much of its time at oneDNN's barriers (libgomp
// was 13% of the step); the two products have the same FLOPs (2·n·in·out),
// so the threads finish together. In the model, alternating call by call
// (bench/README.md): config (a)'s four layer products 1-9% faster, GPT-2
// small's proj (1.2 GFLOP) 7% faster and its fc1 and LM head (4.8, 79 GFLOP)
// 4% slower: larger products stay split. More threads than two stay split
// too: oneDNN runs single-threaded inside a parallel region, so side by
// side would use two of them. Each product gives what sgemm gives on one
// thread (the same call).
constexpr double kSideBySideMaxFlops = 2e9;

bool gradients_side_by_side(const float* dinp, const float* dweight, const float* dout,
                            ReadView inp, ReadView weight, int64_t n, int64_t in,
                            int64_t out_features, const Compute& cm) {
  return cm.math == MathMode::kF32 && dinp && dweight && dout && inp.f32 && weight.f32 &&
         2.0 * double(n) * double(in) * double(out_features) <= kSideBySideMaxFlops &&
         omp_get_max_threads() == 2 && !omp_in_parallel();
}

void check_weight_math(ReadView x, const Compute& cm) {
  MT_CHECK(x.bf16 == nullptr || cm.math == MathMode::kBF16, "linear: a bf16-stored operand in ",
           math_mode_name(cm.math), " math (internal error: bf16 storage belongs to --bf16 runs)");
}
}  // namespace

void linear_forward(WriteView out, ReadView inp, ReadView weight, ReadView bias, int64_t n,
                    int64_t in, int64_t out_features, const Compute& cm) {
  if (MT_ON_DEVICE(out.raw()))
    return cuda::linear_forward(out, inp, weight, bias, n, in, out_features, cm);
  check_weight_math(weight, cm);
  check_weight_math(inp, cm);
  // out (n, out) = inp (n, in) · W (out, in)ᵀ + bias
  MatmulShape s;
  s.m = n;
  s.n = out_features;
  s.k = in;
  s.trans_b = true;
  s.math = cm.math;
  matmul(out, inp.f32, weight.f32, bias, s, weight.bf16, inp.bf16);
}

void linear_backward(float* dinp, float* dweight, float* dbias, ReadView dout_in, ReadView inp,
                     ReadView weight, int64_t n, int64_t in, int64_t out_features,
                     bool accumulate_dinp, const Compute& cm) {
  // Any of the three outputs may be null; whichever is given says where the layer lives.
  if (MT_ON_DEVICE(dweight) || MT_ON_DEVICE(dinp) || MT_ON_DEVICE(dbias))
    return cuda::linear_backward(dinp, dweight, dbias, dout_in, inp, weight, n, in, out_features,
                                 accumulate_dinp, cm);
  check_weight_math(weight, cm);
  check_weight_math(inp, cm);
  check_weight_math(dout_in, cm);
  MT_CHECK(dout_in && (dbias == nullptr || dout_in.f32 != nullptr),
           "linear_backward: dout is null, or bf16 with a bias gradient to sum; fix: pass an "
           "fp32 dout when the layer has a bias");
  const float* dout = dout_in.f32;
  // bf16: round dout once for both products instead of once per product
  // (or read it as stored).
  const uint16_t* dout16 = dout_in.bf16;
  bool bias_done = false;
  if (cm.math == MathMode::kBF16 && dinp && dweight && dout16 == nullptr) {
    DoutScratch& scratch = dout_scratch();
    std::lock_guard<std::mutex> lock(scratch.mu);
    auto* buf = static_cast<uint16_t*>(
        grown(scratch.buf, size_t(n * out_features) * sizeof(uint16_t)));
    if (dbias) {  // the bias gradient from the same read of dout
      column_sums(dbias, buf, dout, n, out_features);
      bias_done = true;
    } else {
      f32_to_bf16(buf, dout, n * out_features);
    }
    dout16 = buf;
  }
  if (gradients_side_by_side(dinp, dweight, dout, inp, weight, n, in, out_features, cm)) {
    // dinp (n, in) (+)= dout (n, out) · W (out, in); dweight (out, in) += doutᵀ · inp (n, in)
    const SgemmCall products[2] = {
        {false, n, in, out_features, dout, out_features, weight.f32, in, accumulate_dinp, dinp, in},
        {true, out_features, in, n, dout, out_features, inp.f32, in, true, dweight, in}};
    dnnl_status_t st[2] = {dnnl_success, dnnl_success};
#pragma omp parallel for num_threads(2) schedule(static, 1)  // (on one thread if given one)
    for (int i = 0; i < 2; ++i) st[i] = run_sgemm(products[i]);
    for (int i = 0; i < 2; ++i) check_sgemm(products[i], st[i]);
    dinp = dweight = nullptr;  // done
  }
  if (dinp) {
    // dinp (n, in) = dout (n, out) · W (out, in)
    MatmulShape s;
    s.m = n;
    s.n = in;
    s.k = out_features;
    s.accumulate = accumulate_dinp;
    s.math = cm.math;
    matmul(dinp, dout, weight.f32, nullptr, s, weight.bf16, dout16);
  }
  if (dweight) {
    // dweight (out, in) += dout (n, out)ᵀ · inp (n, in): low-precision
    // operands, accumulated into the fp32 gradient
    MatmulShape s;
    s.m = out_features;
    s.n = in;
    s.k = n;
    s.trans_a = true;
    s.accumulate = true;
    s.math = cm.math;
    matmul(dweight, dout, inp.f32, nullptr, s, inp.bf16, dout16);
  }
  if (dbias && !bias_done) bias_backward(dbias, dout, n, out_features);  // fp32
}

void grouped_linear_forward(WriteView out, ReadView inp, ReadView weight, int64_t weight_stride,
                            int64_t groups, int64_t rows, int64_t in, int64_t out_features,
                            const Compute& cm) {
  MT_CHECK(!MT_ON_DEVICE(out.raw()), "grouped_linear_forward has no GPU twin yet");
  MT_CHECK(weight_stride >= in * out_features, "grouped_linear_forward: weight stride ",
           weight_stride, " is below one weight's ", in * out_features, " elements");
  check_weight_math(weight, cm);
  check_weight_math(inp, cm);
  MatmulShape s;
  s.batch = groups;
  s.m = rows;
  s.n = out_features;
  s.k = in;
  s.trans_b = true;
  s.batch_stride_a = rows * in;
  s.batch_stride_b = weight_stride;
  s.batch_stride_c = rows * out_features;
  s.math = cm.math;
  if (out.bf16 != nullptr && groups > 1) {
    // A bf16 output (--bf16's saved activations) is written by oneDNN only
    // one dense product at a time: a product per group.
    s.batch = 1;
    for (int64_t g = 0; g < groups; ++g) {
      const ReadView a = inp.at(g * rows * in), b = weight.at(g * weight_stride);
      matmul(out.at(g * rows * out_features), a.f32, b.f32, nullptr, s, b.bf16, a.bf16);
    }
    return;
  }
  matmul(out, inp.f32, weight.f32, nullptr, s, weight.bf16, inp.bf16);
}

void grouped_linear_backward(float* dinp, float* dweight, int64_t grad_stride, const float* dout,
                             ReadView inp, ReadView weight, int64_t weight_stride, int64_t groups,
                             int64_t rows, int64_t in, int64_t out_features, const Compute& cm) {
  MT_CHECK(!MT_ON_DEVICE(dweight), "grouped_linear_backward has no GPU twin yet");
  MT_CHECK(weight_stride >= in * out_features && grad_stride >= in * out_features,
           "grouped_linear_backward: strides ", weight_stride, ", ", grad_stride,
           " are below one weight's ", in * out_features, " elements");
  check_weight_math(weight, cm);
  check_weight_math(inp, cm);
  if (dinp) {  // dinp_g (rows, in) = dout_g (rows, out) · W_g (out, in)
    MatmulShape s;
    s.batch = groups;
    s.m = rows;
    s.n = in;
    s.k = out_features;
    s.batch_stride_a = rows * out_features;
    s.batch_stride_b = weight_stride;
    s.batch_stride_c = rows * in;
    s.math = cm.math;
    matmul(dinp, dout, weight.f32, nullptr, s, weight.bf16);
  }
  // dweight_g (out, in) += dout_g (rows, out)ᵀ · inp_g (rows, in)
  MatmulShape s;
  s.batch = groups;
  s.m = out_features;
  s.n = in;
  s.k = rows;
  s.trans_a = true;
  s.batch_stride_a = rows * out_features;
  s.batch_stride_b = rows * in;
  s.batch_stride_c = grad_stride;
  s.accumulate = true;
  s.math = cm.math;
  matmul(dweight, dout, inp.f32, nullptr, s, inp.bf16);
}

namespace {
template <class T>
void bias_add_impl(float* x, const T* bias, int64_t n, int64_t c) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    float* row = x + r * c;
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) row[j] += load_f32(bias, j);
  }
}
}  // namespace

void bias_add(float* x, ReadView bias, int64_t n, int64_t c) {
  if (MT_ON_DEVICE(x)) return cuda::bias_add(x, bias, n, c);
  if (bias.bf16)
    bias_add_impl(x, bias.bf16, n, c);
  else
    bias_add_impl(x, bias.f32, n, c);
}

void bias_backward(float* dbias, const float* dout, int64_t n, int64_t c) {
  if (MT_ON_DEVICE(dbias)) return cuda::bias_backward(dbias, dout, n, c);
  column_sums(dbias, nullptr, dout, n, c);
}

int64_t linear_scratch_bytes() {
  DoutScratch& s = dout_scratch();
  std::lock_guard<std::mutex> lock(s.mu);
  return int64_t(s.buf.size());
}

}  // namespace mt
