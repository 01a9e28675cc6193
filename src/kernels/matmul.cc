// Matrix multiply through cached oneDNN matmul primitives (oneDNN 2.x API).
//
// Every MatmulShape is first resolved (0 = dense leading dims / batch strides
// made explicit) and that resolved shape, plus whether a bias is present and
// the math mode, keys a function-local cache of {primitive, memory objects}. A
// call after the first swaps the data pointers of the cached memory objects and
// executes through the C API with a stack array of arguments, so it allocates
// nothing.
//
// Mixed precision. kBF16: A and B (unless the caller passes them in bf16)
// are converted into dense bf16 scratch; the primitive takes bf16 src/weights,
// f32 bias and f32 dst, and accumulates in fp32 (AVX512_BF16 dot products).
// kF16: oneDNN 2.6.3 creates no fp16 matmul at all on these CPUs (AVX-512
// without AVX512_FP16: "could not create a primitive descriptor iterator"), so
// A and B are rounded to fp16 values in fp32 scratch and the fp32 primitive
// runs: the numerics of fp16 operands with fp32 accumulation, at fp32 speed
// (a numerics mode, not a speed-up). The scratch buffers live in the cache,
// grow to the largest operand seen and are then reused; the cache mutex that
// guards the primitives guards them too. Copying into dense layouts also keeps
// oneDNN on its fast bf16 kernels for the strided attention batches.
//
// Unbatched bf16 products whose layout gemm_bf16_supports() accepts go to the
// VDPBF16PS kernel (gemm_bf16.h) once their operands are bf16: on GPT-2
// small's bf16 step it is ~5-7% faster than oneDNN's brgemm (bench/README.md).
// The batched attention products, fp32 and fp16 stay on oneDNN.
//
// fp32 routes (sgemm_route below): an unbatched product without a bias whose
// B is not transposed (the linear layers' input and weight gradients, the LM
// head's) goes to oneDNN's dnnl_sgemm ("gemm:jit"), the rest to a cached
// matmul primitive ("brg:avx512_core" on AVX-512 for the forward products;
// the batched attention products with non-dense batch strides "gemm:jit").
// No shape falls back to "ref:any", so nothing is copied into dense layouts
// in fp32. See the primitives with ONEDNN_VERBOSE=2.
#include "kernels/matmul.h"

#include <algorithm>
#include <chrono>
#include <compare>
#include <omp.h>

#include <map>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "backend/device.h"
#include "core/arena.h"
#include "core/error.h"
#include "kernels/cuda/matmul.h"
#include "kernels/gemm_bf16.h"
#include "kernels/matmul_pack.h"
#include "kernels/sgemm_call.h"

namespace mt {
namespace {

using dnnl::memory;

// A MatmulShape with every stride explicit, plus bias presence, math mode and
// thread count. In bf16/fp16 the strides are those of the operands the
// primitive reads (dense scratch copies, or the caller's bf16 B).
struct MatmulKey {
  int64_t batch, m, n, k;
  bool trans_a, trans_b;
  int64_t lda, ldb, ldc;
  int64_t bsa, bsb, bsc;
  bool accumulate, has_bias;
  bool c_bf16;  // C stored in bf16 (rounded from the fp32 accumulation)
  MathMode math;
  int threads;  // oneDNN fixes a primitive's parallel split at creation
  auto operator<=>(const MatmulKey&) const = default;
};

struct MatmulEntry {
  dnnl::matmul prim;
  memory a_mem, b_mem, c_mem, bias_mem;  // data handles swapped per call
};

// Engine, stream, primitive cache and operand scratch: one per process,
// created on first use.
// oneDNN 2.6's AMX bf16 matmul (brg:avx512_core_amx_bf16) gave wrong products
// (relative error ~1) for an odd k with a transposed B on an H100 machine's
// AMX host CPU (tests/kernels/matmul_test.cc has the case): oneDNN is kept
// at AVX512-BF16 unless ONEDNN_MAX_CPU_ISA says otherwise. Before the engine.
bool cap_onednn_isa() {
  if (std::getenv("ONEDNN_MAX_CPU_ISA") != nullptr) return false;
  return dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx512_core_bf16) == dnnl::status::success;
}

struct MatmulCache {
  bool isa_capped = cap_onednn_isa();  // first: before any primitive
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::mutex mu;  // guards everything below and the handles of the cached memory objects
  std::map<MatmulKey, MatmulEntry> entries;
  HostBuffer scratch_a, scratch_b;  // low-precision copies of A and B
  HostBuffer scratch_bias;          // a bf16 bias widened to fp32
  HostBuffer scratch_c;             // fp32 C before its bf16 rounding (no oneDNN bf16)
};

MatmulCache& matmul_cache() {
  static MatmulCache cache;
  return cache;
}


MatmulKey resolve(const MatmulShape& s, bool has_bias) {
  MT_CHECK(s.batch >= 1 && s.m >= 1 && s.n >= 1 && s.k >= 1,
           "matmul: sizes must be positive, got batch=", s.batch, " m=", s.m, " n=", s.n,
           " k=", s.k, "; fix: skip empty products in the caller");
  // Stored shapes: A is (m, k) or (k, m) when trans_a; B is (k, n) or (n, k).
  const int64_t a_rows = s.trans_a ? s.k : s.m, a_cols = s.trans_a ? s.m : s.k;
  const int64_t b_rows = s.trans_b ? s.n : s.k, b_cols = s.trans_b ? s.k : s.n;
  MatmulKey key{};
  key.batch = s.batch;
  key.m = s.m;
  key.n = s.n;
  key.k = s.k;
  key.trans_a = s.trans_a;
  key.trans_b = s.trans_b;
  key.lda = s.lda ? s.lda : a_cols;
  key.ldb = s.ldb ? s.ldb : b_cols;
  key.ldc = s.ldc ? s.ldc : s.n;
  MT_CHECK(key.lda >= a_cols && key.ldb >= b_cols && key.ldc >= s.n,
           "matmul: leading dimension smaller than the stored row, lda=", key.lda, " (row ", a_cols,
           ") ldb=", key.ldb, " (row ", b_cols, ") ldc=", key.ldc, " (row ", s.n,
           "); fix: pass the row stride of the stored matrix, or 0 for dense");
  const bool one = s.batch == 1;  // batch strides are irrelevant then: share the entry
  key.bsa = (one || s.batch_stride_a == 0) ? a_rows * key.lda : s.batch_stride_a;
  key.bsb = (one || s.batch_stride_b == 0) ? b_rows * key.ldb : s.batch_stride_b;
  key.bsc = (one || s.batch_stride_c == 0) ? s.m * key.ldc : s.batch_stride_c;
  MT_CHECK(key.bsa > 0 && key.bsb > 0 && key.bsc > 0, "matmul: negative batch stride (a=", key.bsa,
           " b=", key.bsb, " c=", key.bsc, "); fix: pass 0 for dense");
  key.accumulate = s.accumulate;
  key.has_bias = has_bias;
  key.math = s.math;
  key.threads = omp_get_max_threads();
  return key;
}

MatmulEntry create_entry(const MatmulKey& key, const dnnl::engine& engine) {
  using dt = memory::data_type;
  const dt in_dt = key.math == MathMode::kBF16 ? dt::bf16 : dt::f32;  // fp16 is emulated in f32
  // Logical dims (batch, rows, cols); transposition lives in the strides.
  const memory::desc a_md(
      {key.batch, key.m, key.k}, in_dt,
      key.trans_a ? memory::dims{key.bsa, 1, key.lda} : memory::dims{key.bsa, key.lda, 1});
  const memory::desc b_md(
      {key.batch, key.k, key.n}, in_dt,
      key.trans_b ? memory::dims{key.bsb, 1, key.ldb} : memory::dims{key.bsb, key.ldb, 1});
  const memory::desc c_md({key.batch, key.m, key.n}, key.c_bf16 ? dt::bf16 : dt::f32,
                          memory::dims{key.bsc, key.ldc, 1});
  const memory::desc bias_md({1, 1, key.n}, dt::f32, memory::dims{key.n, key.n, 1});
  dnnl::primitive_attr attr;
  if (key.accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  try {
    const auto desc = key.has_bias ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md)
                                   : dnnl::matmul::desc(a_md, b_md, c_md);
    const dnnl::matmul::primitive_desc pd(desc, attr, engine);
    MatmulEntry e;
    e.prim = dnnl::matmul(pd);
    e.a_mem = memory(a_md, engine, nullptr);
    e.b_mem = memory(b_md, engine, nullptr);
    e.c_mem = memory(c_md, engine, nullptr);
    if (key.has_bias) e.bias_mem = memory(bias_md, engine, nullptr);
    return e;
  } catch (const dnnl::error& err) {
    MT_FAIL("matmul: oneDNN could not create a ", math_mode_name(key.math),
            " primitive for batch=", key.batch, " m=", key.m, " n=", key.n, " k=", key.k,
            " trans_a=", key.trans_a, " trans_b=", key.trans_b, " lda=", key.lda,
            " ldb=", key.ldb, " ldc=", key.ldc, ": ", err.what(), " (status ", int(err.status),
            "); fix: use dense strides");
  }
}

// oneDNN 2.6 on AVX-512 gives a dense fp32 matmul primitive to its brgemm
// kernels ("brg:avx512_core"), which read a non-transposed B (k, n) slowly:
// measured 2026-11-30 on an AVX-512 Xeon, 2 threads, GFLOP/s (brgemm ->
// dnnl_sgemm, oneDNN's own packed GEMM, "gemm:jit"), GPT-2 small's products:
// the input gradients qkv 229 -> 280, fc1 248 -> 288, fc2 165 -> 248, LM head
// 161 -> 227; fc2's weight gradient 146 -> 272 (B's rows 3072 floats apart);
// the other weight gradients and 2048^3 alike or better (236 -> 274); 2-3x at
// the small shapes of tests and tiny models. A transposed B (the forward
// products) is as fast either way, and a bias fuses only into the primitive:
// those stay on it, as do batched products. fp16 (emulated) and bf16 without
// bf16 instructions reach here as fp32 products and take the same route.
bool sgemm_route(const MatmulKey& key) {
  return key.math != MathMode::kBF16 && key.batch == 1 && !key.trans_b && !key.has_bias &&
         !key.c_bf16;
}

// Whether oneDNN can create bf16 matmuls here (it cannot on CPUs without
// AVX-512, or under ONEDNN_MAX_CPU_ISA=AVX2); probed once.
bool probe_bf16_matmul(const dnnl::engine& engine) {
  using dt = memory::data_type;
  const memory::desc a({1, 16, 16}, dt::bf16, memory::dims{256, 16, 1});
  const memory::desc c({1, 16, 16}, dt::f32, memory::dims{256, 16, 1});
  try {
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, a, c), engine);
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

}  // namespace

bool matmul_bf16_native() {
  MatmulCache& cache = matmul_cache();
  // Without bf16 instructions oneDNN emulates bf16 products (3x slower than
  // fp32 on a Cascade Lake Xeon): multiplying the bf16 values in fp32 is faster.
  static const bool ok = cpu_has_native_bf16() && probe_bf16_matmul(cache.engine);
  return ok;
}

namespace {

// matmul(); with_own_kernel false keeps every product on oneDNN (for the peak).
void matmul_impl(WriteView c_out, const float* a, const float* b, ReadView bias_ref,
                 const MatmulShape& s, const uint16_t* b_bf16, const uint16_t* a_bf16,
                 bool with_own_kernel) {
  const bool bf16 = s.math == MathMode::kBF16;
  MT_CHECK(!c_out.bf16 || (bf16 && !s.accumulate && (s.ldc == 0 || s.ldc == s.n) &&
                           (s.batch == 1 || s.batch_stride_c == 0)),
           "matmul: a bf16 C needs bf16 math, no accumulation and dense C (internal error)");
  float* c = c_out.f32;
  const bool use_a_bf16 = bf16 && a_bf16 != nullptr, use_b_bf16 = bf16 && b_bf16 != nullptr;
  MT_CHECK(c_out && (a || use_a_bf16) && (b || use_b_bf16), "matmul: null pointer (c=", c, " a=", a,
           " b=", b, " a_bf16=", a_bf16, " b_bf16=", b_bf16, " math=", math_mode_name(s.math),
           "); fix: pass allocated buffers (a, b may be null only with their bf16 twin in bf16)");
  MatmulKey key = resolve(s, bool(bias_ref));
  key.c_bf16 = c_out.bf16 != nullptr;
  MatmulCache& cache = matmul_cache();
  std::lock_guard<std::mutex> lock(cache.mu);
  void* c_data = c_out.bf16 ? static_cast<void*>(c_out.bf16) : static_cast<void*>(c);
  const float* bias = bias_ref.f32;
  if (bias_ref.bf16) {  // a bf16 model's bias: (n) floats, widened per call
    auto* wide = static_cast<float*>(grown(cache.scratch_bias, size_t(s.n) * sizeof(float)));
    bf16_to_f32(wide, bias_ref.bf16, s.n);
    bias = wide;
  }
  const void* a_data = a;
  const void* b_data = b;
  if (bf16 && !matmul_bf16_native()) {
    // No bf16 matmul in oneDNN on this CPU: the same numbers from the fp32
    // primitive (bf16 products are exact in fp32, accumulation is fp32 either
    // way), at fp32 speed.
    a_data = pack_bf16_as_f32(cache.scratch_a, a, use_a_bf16 ? a_bf16 : nullptr, key.batch,
                              s.trans_a ? s.k : s.m, s.trans_a ? s.m : s.k, &key.lda, &key.bsa);
    b_data = pack_bf16_as_f32(cache.scratch_b, b, use_b_bf16 ? b_bf16 : nullptr, key.batch,
                              s.trans_b ? s.n : s.k, s.trans_b ? s.k : s.n, &key.ldb, &key.bsb);
    key.math = MathMode::kF32;
    if (key.c_bf16) {  // fp32 C in scratch, rounded below
      key.c_bf16 = false;
      c_data = grown(cache.scratch_c, size_t(s.batch * s.m * s.n) * sizeof(float));
    }
  } else if (s.math != MathMode::kF32) {
    // Operands given in bf16 are used as they are, in their own layout (the
    // key keeps their strides); the others are packed dense.
    if (use_a_bf16)
      a_data = a_bf16;
    else
      a_data = pack_operand(cache.scratch_a, a, s.math, key.batch, s.trans_a ? s.k : s.m,
                            s.trans_a ? s.m : s.k, &key.lda, &key.bsa);
    if (use_b_bf16)
      b_data = b_bf16;
    else
      b_data = pack_operand(cache.scratch_b, b, s.math, key.batch, s.trans_b ? s.n : s.k,
                            s.trans_b ? s.k : s.n, &key.ldb, &key.bsb);
  }
  if (with_own_kernel && s.math == MathMode::kBF16 && key.batch == 1 && matmul_bf16_native()) {
    // Single bf16 products (the linear layers) run faster on the VDPBF16PS
    // kernel than on oneDNN 2.6; the batched attention products stay there.
    Bf16Gemm g;
    g.m = s.m;
    g.n = s.n;
    g.k = s.k;
    g.a = static_cast<const uint16_t*>(a_data);
    g.lda = key.lda;
    g.trans_a = s.trans_a;
    g.b = static_cast<const uint16_t*>(b_data);
    g.ldb = key.ldb;
    g.trans_b = s.trans_b;
    g.c = c;
    g.c_bf16 = c_out.bf16;
    g.ldc = key.ldc;
    g.bias = bias;
    g.accumulate = s.accumulate;
    if (gemm_bf16_supports(g)) {
      gemm_bf16(g);
      return;
    }
  }
  if (sgemm_route(key)) {
    const SgemmCall g{s.trans_a, s.m, s.n, s.k, static_cast<const float*>(a_data), key.lda,
                      static_cast<const float*>(b_data), key.ldb, s.accumulate,
                      static_cast<float*>(c_data), key.ldc};
    check_sgemm(g, run_sgemm(g));
  } else {
    auto it = cache.entries.find(key);
    if (it == cache.entries.end())
      it = cache.entries.emplace(key, create_entry(key, cache.engine)).first;
    MatmulEntry& e = it->second;
    e.a_mem.set_data_handle(const_cast<void*>(a_data));
    e.b_mem.set_data_handle(const_cast<void*>(b_data));
    e.c_mem.set_data_handle(c_data);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, e.a_mem.get()},
                               {DNNL_ARG_WEIGHTS, e.b_mem.get()},
                               {DNNL_ARG_DST, e.c_mem.get()},
                               {DNNL_ARG_BIAS, nullptr}};
    int nargs = 3;
    if (bias) {
      e.bias_mem.set_data_handle(const_cast<float*>(bias));
      args[3].memory = e.bias_mem.get();
      nargs = 4;
    }
    const dnnl_status_t st =
        dnnl_primitive_execute(e.prim.get(), cache.stream.get(), nargs, args);
    MT_CHECK(st == dnnl_success, "matmul: oneDNN execute failed with status ", int(st),
             " for m=", s.m, " n=", s.n, " k=", s.k, " math=", math_mode_name(s.math),
             "; fix: check the buffers and strides");
    cache.stream.wait();
  }
  if (c_out.bf16 && c_data != c_out.bf16)
    f32_to_bf16(c_out.bf16, static_cast<const float*>(c_data), s.batch * s.m * s.n);
}

}  // namespace

void matmul(WriteView c_out, const float* a, const float* b, ReadView bias_ref,
            const MatmulShape& s, const uint16_t* b_bf16, const uint16_t* a_bf16) {
  if (MT_ON_DEVICE(c_out.raw())) return cuda::matmul(c_out, a, b, bias_ref, s, b_bf16, a_bf16);
  matmul_impl(c_out, a, b, bias_ref, s, b_bf16, a_bf16, /*with_own_kernel=*/true);
}

int64_t matmul_primitive_count() {
  MatmulCache& cache = matmul_cache();
  std::lock_guard<std::mutex> lock(cache.mu);
  return int64_t(cache.entries.size());
}

int64_t matmul_scratch_bytes() {
  MatmulCache& cache = matmul_cache();
  std::lock_guard<std::mutex> lock(cache.mu);
  return int64_t(cache.scratch_a.size() + cache.scratch_b.size() + cache.scratch_bias.size() +
                 cache.scratch_c.size()) +
         linear_scratch_bytes() + gemm_bf16_scratch_bytes();
}

#ifndef MT_CUDA
// CPU-only builds: the GPU's probe exists (so callers need no #ifdef) but cannot run.
double cuda::measure_matmul_peak_flops(int64_t, MathMode) {
  MT_FAIL("--device cuda: ", cuda_unavailable_reason());
}
#endif

double measure_matmul_peak_flops_on(Device device, MathMode math) {
  // An H100 reaches its bf16 rate only on large products (2048^3: ~20% below 8192^3).
  return device == Device::kCuda ? cuda::measure_matmul_peak_flops(8192, math)
                                 : measure_matmul_peak_flops(2048, math);
}

std::vector<PeakShape> matmul_peak_shapes(int64_t size, PeakShape model_linear) {
  std::vector<PeakShape> shapes = {{size, size, size}, {2 * size, size, size / 2}};
  if (model_linear.m > 0 && model_linear.n > 0 && model_linear.k > 0) {
    const int64_t rows = size * size / model_linear.n * size / model_linear.k;  // size³ / (n k)
    model_linear.m = std::min(model_linear.m, std::max<int64_t>(64, rows / 64 * 64));
    shapes.push_back(model_linear);
  }
  return shapes;
}

std::string PeakMeasurement::describe() const {
  std::string s;
  char buf[96];
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s%lldx%lldx%lld %.1f", i ? ", " : "",
                  static_cast<long long>(shapes[i].m), static_cast<long long>(shapes[i].n),
                  static_cast<long long>(shapes[i].k), shape_flops[i] / 1e9);
    s += buf;
  }
  std::snprintf(buf, sizeof buf, " GFLOP/s, best of %d rounds in %.2f s", rounds, seconds);
  return s + buf;
}

// The GPU's rate is cuda::measure_matmul_peak_flops (kernels/cuda/matmul.h).
PeakMeasurement measure_matmul_peak(const std::vector<PeakShape>& shapes, MathMode math,
                                    double budget_seconds) {
  MT_CHECK(!shapes.empty(), "measure_matmul_peak: no shapes (internal error)");
  for (const PeakShape& p : shapes)
    MT_CHECK(p.m > 0 && p.n > 0 && p.k > 0, "measure_matmul_peak: shape ", p.m, "x", p.n, "x",
             p.k, " has a size <= 0 (internal error)");
  const bool bf16 = math == MathMode::kBF16;
  struct Operands {
    std::vector<float> a, b, c;
    std::vector<uint16_t> a16, b16;
    MatmulShape s;
  };
  std::vector<Operands> ops(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    Operands& o = ops[i];
    const PeakShape& p = shapes[i];
    o.a.resize(size_t(p.m * p.k));
    o.b.resize(size_t(p.k * p.n));
    o.c.resize(size_t(p.m * p.n));
    for (size_t j = 0; j < o.a.size(); ++j) o.a[j] = float(j % 13) * 0.01f;
    for (size_t j = 0; j < o.b.size(); ++j) o.b[j] = float(j % 7) * 0.02f;
    o.s.m = p.m, o.s.n = p.n, o.s.k = p.k;
    o.s.math = math;
    // In bf16 both operands are stored in bf16, so no conversion is timed:
    // the rate of the GEMM itself, the highest the library reaches here.
    if (bf16) {
      o.a16.resize(o.a.size());
      o.b16.resize(o.b.size());
      f32_to_bf16(o.a16.data(), o.a.data(), int64_t(o.a.size()));
      f32_to_bf16(o.b16.data(), o.b.data(), int64_t(o.b.size()));
    }
  }
  // In bf16 oneDNN and the VDPBF16PS kernel (gemm_bf16.h) in turn; without
  // native bf16 both would be oneDNN's fp32 product, so it runs once.
  const int kernels = bf16 && matmul_bf16_native() ? 2 : 1;
  PeakMeasurement r;
  r.shapes = shapes;
  r.shape_flops.assign(shapes.size(), 0.0);
  const auto start = std::chrono::steady_clock::now();
  auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  // A peak, not a typical rate: each shape's best run. The first round
  // includes creating the primitives, so there are at least 2.
  double last_round = 0;
  std::vector<std::vector<double>> runs(shapes.size());  // each shape's, from round 2 on
  while (r.rounds < 2 || (r.rounds < 100 && since(start) + last_round <= budget_seconds)) {
    const auto round_start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < shapes.size(); ++i) {
      Operands& o = ops[i];
      const double flop = 2.0 * double(o.s.m) * double(o.s.n) * double(o.s.k);
      double round_best = 0;  // over the kernels
      for (int kernel = 0; kernel < kernels; ++kernel) {
        const auto t0 = std::chrono::steady_clock::now();
        matmul_impl(o.c.data(), o.a.data(), o.b.data(), nullptr, o.s,
                    bf16 ? o.b16.data() : nullptr, bf16 ? o.a16.data() : nullptr, kernel == 1);
        round_best = std::max(round_best, flop / since(t0));
      }
      r.shape_flops[i] = std::max(r.shape_flops[i], round_best);
      if (r.rounds > 0) runs[i].push_back(round_best);
    }
    last_round = since(round_start);
    ++r.rounds;
  }
  r.seconds = since(start);
  const size_t best = size_t(std::max_element(r.shape_flops.begin(), r.shape_flops.end()) -
                             r.shape_flops.begin());
  r.flops = r.shape_flops[best];
  std::vector<double>& mine = runs[best];
  std::nth_element(mine.begin(), mine.begin() + mine.size() / 2, mine.end());
  r.median_ratio = mine[mine.size() / 2] / r.flops;
  return r;
}

double measure_matmul_peak_flops(int64_t size, MathMode math) {
  MT_CHECK(size >= 64, "measure_matmul_peak_flops: size ", size,
           " is too small to measure a peak; fix: use >= 64 (default 2048)");
  return measure_matmul_peak(matmul_peak_shapes(size), math).flops;
}

}  // namespace mt
