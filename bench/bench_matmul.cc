// Matmul and attention throughput on the shapes of GPT-2 small (s=1024, b=1,
// h=768, a=12), in fp32 and in bf16 (mixed precision: bf16 operands, fp32
// accumulation and outputs). One JSON line per shape and math mode: best-of-N
// milliseconds and GFLOP/s. In bf16 the linear weights and bias are stored in
// bf16 (as a bf16 model holds them) and the conversion of the activations is
// part of the time. Run with OMP_NUM_THREADS=<cores>;
// ONEDNN_VERBOSE=1 shows which oneDNN implementation each shape gets.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "bench_timing.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"

namespace {

void report(const std::string& name, mt::MathMode math, int64_t m, int64_t n, int64_t k,
            double flop, double ms) {
  std::printf(
      "{\"bench\":\"matmul\",\"name\":\"%s\",\"math\":\"%s\",\"m\":%lld,\"n\":%lld,"
      "\"k\":%lld,\"threads\":%d,\"ms\":%.3f,\"gflops\":%.1f}\n",
      name.c_str(), mt::math_mode_name(math), (long long)m, (long long)n, (long long)k,
      omp_get_max_threads(), ms, flop / (ms * 1e-3) / 1e9);
  std::fflush(stdout);
}

std::vector<float> filled(int64_t n, float scale) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[size_t(i)] = scale * float((i * 7919) % 23 - 11);
  return x;
}

// A (both operands converted per call) and, in bf16, also with B given in
// bf16 (the weight-shadow case).
void bench_square(int64_t size, mt::MathMode math) {
  auto a = filled(size * size, 0.01f), b = filled(size * size, 0.01f);
  std::vector<float> c(static_cast<size_t>(size * size));
  std::vector<uint16_t> b16(static_cast<size_t>(size * size));
  mt::f32_to_bf16(b16.data(), b.data(), size * size);
  mt::MatmulShape s;
  s.m = s.n = s.k = size;
  s.math = math;
  const double flop = 2.0 * size * size * size;
  const std::string name = "square " + std::to_string(size);
  report(name, math, size, size, size, flop,
         best_ms([&] { mt::matmul(c.data(), a.data(), b.data(), nullptr, s); }));
  if (math == mt::MathMode::kBF16)
    report(name + " b_bf16", math, size, size, size, flop,
           best_ms([&] { mt::matmul(c.data(), a.data(), nullptr, nullptr, s, b16.data()); }));
}

void bench_linear(int64_t rows, int64_t in, int64_t out, mt::MathMode math) {
  auto inp = filled(rows * in, 0.01f), w = filled(out * in, 0.01f), bias = filled(out, 0.1f);
  auto dout = filled(rows * out, 0.01f);
  std::vector<float> y(static_cast<size_t>(rows * out)), dinp(static_cast<size_t>(rows * in));
  std::vector<float> dw(static_cast<size_t>(out * in)), db(static_cast<size_t>(out));
  std::vector<uint16_t> w16(w.size()), b16(bias.size());
  mt::f32_to_bf16(w16.data(), w.data(), int64_t(w.size()));
  mt::f32_to_bf16(b16.data(), bias.data(), int64_t(bias.size()));
  mt::Compute cm;
  cm.math = math;
  const bool bf16 = math == mt::MathMode::kBF16;
  const mt::ReadView wr = bf16 ? mt::ReadView(w16.data()) : mt::ReadView(w.data());
  const mt::ReadView br = bf16 ? mt::ReadView(b16.data()) : mt::ReadView(bias.data());
  const double flop = 2.0 * rows * in * out;
  const std::string shape = std::to_string(in) + "->" + std::to_string(out);
  report("linear_fwd " + shape, math, rows, out, in, flop, best_ms([&] {
           mt::linear_forward(y.data(), inp.data(), wr, br, rows, in, out, cm);
         }));
  report("linear_bwd_data " + shape, math, rows, in, out, flop, best_ms([&] {
           mt::linear_backward(dinp.data(), nullptr, nullptr, dout.data(), inp.data(), wr, rows,
                               in, out, false, cm);
         }));
  report("linear_bwd_weight " + shape, math, out, in, rows, flop, best_ms([&] {
           mt::linear_backward(nullptr, dw.data(), nullptr, dout.data(), inp.data(), wr, rows,
                               in, out, false, cm);
         }));
}

// Effective FLOPs as FlashAttention counts them: causal forward 2·b·a·s²·d
// (half of the two s×s×d products), backward 2.5× forward (recompute not counted).
void bench_attention(int64_t b, int64_t a, int64_t s, int64_t d, float p, mt::MathMode math) {
  const mt::AttentionDims dims{b, a, s, d, math};
  const int64_t n = b * a * s * d;
  auto q = filled(n, 0.05f), k = filled(n, 0.05f), v = filled(n, 0.05f), dctx = filled(n, 0.01f);
  std::vector<float> ctx(static_cast<size_t>(n)), lse(static_cast<size_t>(b * a * s));
  std::vector<float> dq(static_cast<size_t>(n)), dk(dq), dv(dq);
  std::vector<float> ws(static_cast<size_t>(mt::attention_workspace_floats(dims)));
  mt::AttentionDropout drop;
  drop.rng = mt::RngStream::make(1, "bench_attention");
  drop.p = p;
  const double fwd_flop = 2.0 * b * a * s * s * d;
  const std::string shape = "b=" + std::to_string(b) + " a=" + std::to_string(a) +
                            " s=" + std::to_string(s) + " d=" + std::to_string(d) +
                            " p=" + std::to_string(p).substr(0, 3);
  report("attention_fwd " + shape, math, b * a, s, d, fwd_flop, best_ms([&] {
           mt::attention_forward(ctx.data(), lse.data(), q.data(), k.data(), v.data(), dims, drop,
                                 ws.data());
         }));
  report("attention_bwd " + shape, math, b * a, s, d, 2.5 * fwd_flop, best_ms([&] {
           mt::attention_backward(dq.data(), dk.data(), dv.data(), dctx.data(), q.data(), k.data(),
                                  v.data(), ctx.data(), lse.data(), dims, drop, ws.data());
         }));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Matmul and attention throughput on GPT-2 small's shapes, fp32 and bf16: one JSON "
               "line per shape and math mode (set OMP_NUM_THREADS to the cores)",
               "bench_matmul"};
  if (const int rc = parse_bench_args(app, argc, argv); rc >= 0) return rc;
  std::printf("{\"bench\":\"matmul\",\"name\":\"cpu\",\"native_bf16\":%s}\n",
              mt::cpu_has_native_bf16() ? "true" : "false");
  for (const mt::MathMode math : {mt::MathMode::kF32, mt::MathMode::kBF16}) {
    bench_square(2048, math);
    const int64_t rows = 1024;            // s·b tokens of GPT-2 small at b=1
    bench_linear(rows, 768, 2304, math);  // QKV
    bench_linear(rows, 768, 768, math);   // attention projection
    bench_linear(rows, 768, 3072, math);  // FC1
    bench_linear(rows, 3072, 768, math);  // FC2
    bench_attention(1, 12, 1024, 64, 0.f, math);
    bench_attention(1, 12, 1024, 64, 0.1f, math);
    std::printf(
        "{\"bench\":\"matmul\",\"name\":\"peak\",\"math\":\"%s\",\"threads\":%d,"
        "\"gflops\":%.1f}\n",
        mt::math_mode_name(math), omp_get_max_threads(),
        mt::measure_matmul_peak_flops(2048, math) / 1e9);
  }
  return 0;
}
