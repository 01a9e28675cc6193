// The kernels with CPU paths (kernels/cpu_isa.h) on GPT-2 small's shapes
// (s=1024, h=768, a=12, d=64, ffn 3072, vocab 50304): the dropout masks alone
// (dropout_multipliers), dropout over a (1024, 8, 768) activation, attention
// forward + backward at p=0.1 against p=0 (the difference is the masks' cost,
// per score and pass), the norms, activations, RoPE, cross-entropy, AdamW,
// casts, and zero_streaming of a 256 MB gradient buffer; then config (a)'s
// attention, GELU and the attention block's layout copies (bench_config_a).
// One JSON line per kernel: best-of-N milliseconds, and ns per element. The
// path comes from the environment:
//   for isa in scalar avx2 avx512; do MT_ISA=$isa build/bench/bench_cpu_paths; done
// (oneDNN picks its own, ONEDNN_MAX_CPU_ISA=AVX2 to pin it). With -march=native
// the compiler-vectorised kernels' paths are alike (GCC's tuning for AVX-512
// Xeons prefers 256-bit registers); build with -DMT_ARCH=x86-64-v3 to see
// AVX2 against AVX-512 code.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "bench_timing.h"
#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/cross_entropy.h"
#include "kernels/dropout.h"
#include "kernels/fill.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/layout.h"
#include "kernels/precision.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"

namespace {

const char* isa_env() {
  const char* e = std::getenv("MT_ISA");
  return e && *e ? e : "default";
}

// elements: what ns_per_element counts (0: none).
void report(const char* name, double ms, int64_t elements) {
  std::printf("{\"bench\":\"cpu_paths\",\"name\":\"%s\",\"isa\":\"%s\",\"threads\":%d,\"ms\":%.3f",
              name, isa_env(), omp_get_max_threads(), ms);
  if (elements > 0) std::printf(",\"ns_per_element\":%.3f", ms * 1e6 / double(elements));
  std::printf("}\n");
  std::fflush(stdout);
}

void bench_dropout() {
  const int64_t s = 1024, b = 8, h = 768, n = s * b * h;
  std::vector<float> x(static_cast<size_t>(n), 1.f), res(x), out(x);
  mt::DropoutSpec d;
  d.rng = mt::RngStream::make(1, "bench_dropout", 3);
  d.p = 0.1f;
  d.s_global = s;
  d.h_global = h;
  report("dropout_forward", best_ms([&] {
           mt::dropout_forward(out.data(), x.data(), s, b, h, d);
         }), n);
  report("dropout_add_forward", best_ms([&] {
           mt::dropout_add_forward(out.data(), x.data(), res.data(), s, b, h, d);
         }), n);
  report("dropout_backward", best_ms([&] {
           mt::dropout_backward(out.data(), x.data(), s, b, h, d);
         }), n);
}

void bench_attention() {
  const mt::AttentionDims dims{1, 12, 1024, 64};
  const int64_t n = dims.b * dims.a * dims.s * dims.d;
  std::vector<float> q(static_cast<size_t>(n)), k(q), v(q), dctx(q), ctx(q), dq(q), dk(q), dv(q);
  for (int64_t i = 0; i < n; ++i) q[size_t(i)] = k[size_t(i)] = v[size_t(i)] =
      dctx[size_t(i)] = 0.05f * float((i * 7919) % 23 - 11);
  std::vector<float> lse(static_cast<size_t>(dims.b * dims.a * dims.s));
  std::vector<float> ws(static_cast<size_t>(mt::attention_workspace_floats(dims)));
  // Causal scores drawn a mask: b·a·s(s+1)/2, in forward and again in backward.
  const int64_t scores = dims.b * dims.a * dims.s * (dims.s + 1) / 2;
  double ms_p0 = 0;
  for (float p : {0.f, 0.1f}) {
    mt::AttentionDropout drop;
    drop.rng = mt::RngStream::make(1, "bench_attention");
    drop.p = p;
    const double ms = best_ms([&] {
      mt::attention_forward(ctx.data(), lse.data(), q.data(), k.data(), v.data(), dims, drop,
                            ws.data());
      mt::attention_backward(dq.data(), dk.data(), dv.data(), dctx.data(), q.data(), k.data(),
                             v.data(), ctx.data(), lse.data(), dims, drop, ws.data());
    });
    if (p == 0.f) {
      ms_p0 = ms;
      report("attention_fwd_bwd p=0", ms, 0);
    } else {
      report("attention_fwd_bwd p=0.1", ms, 0);
      report("attention mask (p=0.1 minus p=0)", ms - ms_p0, 2 * scores);
    }
  }
}

// Config (a)'s shapes (b 12, 4 heads of s 64, d 32; ffn activations 768 x
// 512), which stay in cache: attention forward and backward without dropout
// (the small-head path, kernels/attention_small.h, on avx2 and avx512; the
// batched oneDNN path on scalar) and GELU.
void bench_config_a() {
  const mt::AttentionDims dims{12, 4, 64, 32};
  const int64_t n = dims.b * dims.a * dims.s * dims.d;
  std::vector<float> q(static_cast<size_t>(n)), k(q), v(q), dctx(q), ctx(q), dq(q), dk(q), dv(q);
  for (int64_t i = 0; i < n; ++i)
    q[size_t(i)] = k[size_t(i)] = v[size_t(i)] = dctx[size_t(i)] =
        0.05f * float((i * 7919) % 23 - 11);
  std::vector<float> lse(static_cast<size_t>(dims.b * dims.a * dims.s));
  std::vector<float> ws(static_cast<size_t>(mt::attention_workspace_floats(dims)));
  report("attention_forward (a)", best_ms([&] {
           mt::attention_forward(ctx.data(), lse.data(), q.data(), k.data(), v.data(), dims, {},
                                 ws.data());
         }), 0);
  report("attention_backward (a)", best_ms([&] {
           mt::attention_backward(dq.data(), dk.data(), dv.data(), dctx.data(), q.data(),
                                  k.data(), v.data(), ctx.data(), lse.data(), dims, {}, ws.data());
         }), 0);
  const int64_t m = 768 * 512;
  std::vector<float> x(static_cast<size_t>(m)), y(x), g(static_cast<size_t>(m), 1.f);
  for (int64_t i = 0; i < m; ++i) x[size_t(i)] = 0.05f * float(i % 97 - 48);
  report("gelu_forward (a)", best_ms([&] { mt::gelu_forward(y.data(), x.data(), m); }), m);
  report("gelu_backward (a)", best_ms([&] { mt::gelu_backward(y.data(), x.data(), g.data(), m); }),
         m);
  // The attention block's layout copies around it: (s, b, 3h) qkv <-> (b, a,
  // s, d) heads, and the context back to (s, b, h) and its gradient in.
  std::vector<float> qkv(static_cast<size_t>(3 * n)), sbh(static_cast<size_t>(n));
  for (int64_t i = 0; i < 3 * n; ++i) qkv[size_t(i)] = 0.01f * float(i % 101);
  const int64_t s = dims.s, b = dims.b, a = dims.a, d = dims.d;
  report("qkv_to_heads (a)", best_ms([&] {
           mt::qkv_to_heads(q.data(), k.data(), v.data(), qkv.data(), s, b, a, a, d);
         }), 3 * n);
  report("heads_to_qkv (a)", best_ms([&] {
           mt::heads_to_qkv(qkv.data(), dq.data(), dk.data(), dv.data(), s, b, a, a, d);
         }), 3 * n);
  report("heads_to_sbh (a)", best_ms([&] { mt::heads_to_sbh(sbh.data(), ctx.data(), s, b, a, d); }),
         n);
  report("sbh_to_heads (a)", best_ms([&] { mt::sbh_to_heads(dctx.data(), sbh.data(), s, b, a, d); }),
         n);
}

// The masks alone (one thread's Philox lanes and compare): 128-element runs
// over 4M consecutive indices, as a row of attention scores draws them.
void bench_masks() {
  const int64_t n = int64_t(1) << 22;
  const mt::RngStream rng = mt::RngStream::make(1, "bench_masks", 3);
  alignas(64) float mult[mt::kDropoutRun];
  float sink = 0;
  const double ms = best_ms([&] {
    for (int64_t j0 = 0, len = 0; j0 < n; j0 += len) {
      len = mt::dropout_run(uint64_t(j0) + 1, n - j0);  // starting inside a block
      mt::dropout_multipliers(mult, len, uint64_t(j0) + 1, rng, 0.1f, 1.f / 0.9f);
      sink += mult[0];
    }
  });
  report("dropout_multipliers (1 thread)", ms, n);
  if (sink < 0) std::printf("%f\n", sink);
}

std::vector<float> filled(int64_t n, float scale) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[size_t(i)] = scale * float((i * 7919) % 23 - 11);
  return x;
}

// Rows of GPT-2 small's activations (s·b = 8192 tokens) through the row and
// element-wise kernels.
void bench_rows() {
  const int64_t n = 8192, c = 768, f = 3072;
  auto x = filled(n * c, 0.1f), dy = filled(n * c, 0.01f);
  auto w = filled(c, 0.1f), b = filled(c, 0.1f);
  std::vector<float> y(x.size()), dx(x.size()), dw(c), db(c), mean(n), rstd(n);
  report("layernorm_forward", best_ms([&] {
           mt::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(),
                                 n, c, 1e-5f);
         }), n * c);
  report("layernorm_backward", best_ms([&] {
           mt::layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(),
                                  mean.data(), rstd.data(), n, c);
         }), n * c);
  report("rmsnorm_forward", best_ms([&] {
           mt::rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), n, c, 1e-5f);
         }), n * c);
  auto h = filled(n * f / 4, 0.1f);  // a quarter of the ffn activations: 8192 x 768
  std::vector<float> hy(h.size());
  report("gelu_forward", best_ms([&] { mt::gelu_forward(hy.data(), h.data(), int64_t(h.size())); }),
         int64_t(h.size()));
  report("gelu_backward", best_ms([&] {
           mt::gelu_backward(hy.data(), h.data(), h.data(), int64_t(h.size()));
         }), int64_t(h.size()));
  report("swiglu_forward", best_ms([&] {
           mt::swiglu_forward(hy.data(), h.data(), n / 2, c);
         }), n / 2 * c);
  const mt::RopeTable table = mt::make_rope_table(1024, 64, 1.f, 10000.f);
  // (b, a, s, d) = (8, 12, 1024, 64): the queries of the 8192 tokens
  report("rope_forward", best_ms([&] { mt::rope_forward(x.data(), 8, 12, 1024, 64, table, 0); }),
         n * c);
  std::vector<uint16_t> x16(x.size());
  report("f32_to_bf16", best_ms([&] { mt::f32_to_bf16(x16.data(), x.data(), n * c); }), n * c);
  report("round_to_f16", best_ms([&] { mt::round_to_f16(y.data(), x.data(), n * c); }), n * c);
}

void bench_cross_entropy() {
  const int64_t n = 256, v = 50304;
  auto logits = filled(n * v, 0.1f);
  std::vector<float> work(logits.size()), losses(n);
  std::vector<int32_t> targets(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) targets[size_t(i)] = int32_t(i * 97 % v);
  report("softmax_cross_entropy", best_ms([&] {
           std::copy(logits.begin(), logits.end(), work.begin());
           mt::softmax_cross_entropy(losses.data(), work.data(), targets.data(), n, v, 1.f / n);
         }), n * v);
}

void bench_adamw() {
  const int64_t n = int64_t(16) << 20;  // 16M parameters
  auto p = filled(n, 0.01f), g = filled(n, 0.001f);
  std::vector<float> m(p.size()), v(p.size());
  std::vector<uint16_t> copy(p.size());
  mt::AdamWHyper h;
  h.weight_decay = 0.1f;
  int64_t step = 0;
  report("adamw_step (bf16 copy)", best_ms([&] {
           mt::adamw_step(p.data(), g.data(), m.data(), v.data(), n, h, ++step, copy.data());
         }), n);
}

void bench_zero() {
  const int64_t n = int64_t(64) << 20;  // 256 MB
  std::vector<float> g(static_cast<size_t>(n), 1.f);
  report("zero_streaming 256MB", best_ms([&] { mt::zero_streaming(g.data(), n); }), 0);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Throughput of the kernels with CPU paths on GPT-2 small's shapes, on the path "
               "MT_ISA names (scalar, avx2, avx512): one JSON line per kernel",
               "bench_cpu_paths"};
  if (const int rc = parse_bench_args(app, argc, argv); rc >= 0) return rc;
  bench_masks();
  bench_dropout();
  bench_attention();
  bench_config_a();
  bench_rows();
  bench_cross_entropy();
  bench_adamw();
  bench_zero();
}
