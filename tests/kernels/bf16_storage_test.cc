// bf16 storage is storage only: for every kernel that reads or writes bf16
// arrays (ReadView / WriteView), the call with bf16 inputs and outputs equals,
// bit for bit, the same call on fp32 arrays holding the widened bf16 inputs,
// followed by rounding the fp32 outputs to bf16 (nearest even). fp32 outputs
// (statistics, gradients) must be identical too. Each test runs the storage
// combinations of a kernel against that all-fp32 reference call.
//
// Not asserted, because it does not hold today: the row sums of layernorm and
// rmsnorm over a bf16 input (forward: mean/rstd and so out; backward: dinp) or
// a bf16 weight (backward: dinp). GCC vectorises each template instantiation
// of their `omp simd reduction` loops on its own; with bf16 loads it keeps 32
// partial sums (two zmm accumulators) where the fp32 instantiation keeps 16,
// and its scalar tail does not fuse the multiply-add, so those results differ
// from the widened-fp32 call by an ulp or two.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <initializer_list>
#include <ios>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "kernels/attention.h"
#include "kernels/dropout.h"
#include "kernels/embedding.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/layout.h"
#include "kernels/matmul.h"
#include "kernels/precision.h"
#include "kernels/rmsnorm.h"
#include "kernels/swiglu.h"

namespace mt {
namespace bf16_storage_test {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// n floats ~ shift + scale * N(0, 1), from a fixed seed.
std::vector<float> normal(int64_t n, uint32_t seed, float scale = 1.f, float shift = 0.f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(shift, scale);
  std::vector<float> x(size_t(n), 0.f);
  for (float& v : x) v = dist(gen);
  return x;
}

// An input in both storages: x fp32 (not bf16-exact), h = bf16 of x, w = h
// widened: the fp32 values the bf16 storage holds.
struct Input {
  std::vector<float> x, w;
  std::vector<uint16_t> h;
  Input(int64_t n, uint32_t seed, float scale = 1.f, float shift = 0.f)
      : x(normal(n, seed, scale, shift)), w(x.size()), h(x.size()) {
    f32_to_bf16(h.data(), x.data(), n);
    bf16_to_f32(w.data(), h.data(), n);
  }
  // What the call under test reads: bf16 h, or fp32 x.
  ReadView view(bool bf16) const { return bf16 ? ReadView(h.data()) : ReadView(x.data()); }
  // The same values as fp32 storage: the reference call's input.
  ReadView ref(bool bf16) const { return bf16 ? w.data() : x.data(); }
};

// An output in the storage under test, filled with NaN so unwritten elements show.
struct Output {
  bool bf16;
  std::vector<float> f;
  std::vector<uint16_t> h;
  Output(int64_t n, bool is_bf16)
      : bf16(is_bf16), f(is_bf16 ? 0 : size_t(n), kNaN), h(is_bf16 ? size_t(n) : 0, 0x7FC1) {}
  WriteView view() { return bf16 ? WriteView(h.data()) : WriteView(f.data()); }
};

const char* storage(bool bf16) { return bf16 ? "bf16" : "fp32"; }

// "out=bf16 inp=fp32 ..." for the storages of the named arrays.
std::string combo(std::initializer_list<std::pair<const char*, bool>> arrays) {
  std::string s;
  for (const auto& [name, bf16] : arrays) s += std::string(name) + "=" + storage(bf16) + " ";
  return s;
}

std::string hex(uint32_t u) {
  std::ostringstream os;
  os << "0x" << std::hex << u;
  return os.str();
}

// Expects got[i] == want[i] as bit patterns; reports the first mismatch and the count.
void expect_bits(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i]) && bad++ == 0)
      first = int64_t(i);
  if (bad == 0) return;
  const float g = got[size_t(first)], w = want[size_t(first)];
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " differ, first [" << first
                    << "]: " << g << " (" << hex(std::bit_cast<uint32_t>(g)) << ") vs reference "
                    << w << " (" << hex(std::bit_cast<uint32_t>(w)) << ")";
}

// Expects out to hold `want` (the reference call's fp32 output) exactly in
// fp32 storage, or its bf16 rounding in bf16 storage.
void expect_stored(const Output& out, const std::vector<float>& want, const std::string& what) {
  if (!out.bf16) return expect_bits(out.f, want, what);
  ASSERT_EQ(out.h.size(), want.size()) << what;
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < want.size(); ++i)
    if (out.h[i] != bf16_from_f32(want[i]) && bad++ == 0) first = int64_t(i);
  if (bad == 0) return;
  const size_t i = size_t(first);
  EXPECT_EQ(bad, 0) << what << " (bf16): " << bad << " of " << want.size() << " differ, first ["
                    << i << "]: " << hex(out.h[i]) << " (" << f32_from_bf16(out.h[i])
                    << ") vs bf16 of reference " << want[i] << " = " << hex(bf16_from_f32(want[i]));
}

bool bit(int mask, int i) { return (mask >> i) & 1; }

// Norms: every storage of out, weight (and bias) with an fp32 input; the
// parameter gradients for every storage of inp and weight. (Their row sums
// over a bf16 input or weight are left out: see the note at the top.)
TEST(Bf16Storage, LayerNorm) {
  constexpr int64_t n = 13, c = 100;  // c: one full 64-column block and a tail
  const Input inp(n * c, 1, 1.f, 0.3f), weight(c, 2, 0.1f, 1.f), bias(c, 3, 0.1f);
  for (int mask = 0; mask < 8; ++mask) {
    const bool o16 = bit(mask, 0), w16 = bit(mask, 1), b16 = bit(mask, 2);
    SCOPED_TRACE(combo({{"out", o16}, {"inp", false}, {"weight", w16}, {"bias", b16}}));
    Output out(n * c, o16);
    std::vector<float> mean(n, kNaN), rstd(n, kNaN);
    layernorm_forward(out.view(), mean.data(), rstd.data(), inp.view(false), weight.view(w16),
                      bias.view(b16), n, c, 1e-5f);
    std::vector<float> ref(n * c, kNaN), ref_mean(n, kNaN), ref_rstd(n, kNaN);
    layernorm_forward(ref.data(), ref_mean.data(), ref_rstd.data(), inp.ref(false), weight.ref(w16),
                      bias.ref(b16), n, c, 1e-5f);
    expect_stored(out, ref, "out");
    expect_bits(mean, ref_mean, "mean");
    expect_bits(rstd, ref_rstd, "rstd");
  }
  const std::vector<float> dout = normal(n * c, 4);
  std::vector<float> mean(n), rstd(n), y(n * c);
  layernorm_forward(y.data(), mean.data(), rstd.data(), inp.ref(true), weight.ref(true),
                    bias.ref(true), n, c, 1e-5f);
  const std::vector<float> dinp0 = normal(n * c, 5), dw0 = normal(c, 6), db0 = normal(c, 7);
  for (int mask = 1; mask < 4; ++mask) {
    const bool i16 = bit(mask, 0), w16 = bit(mask, 1);
    SCOPED_TRACE(combo({{"inp", i16}, {"weight", w16}}));
    auto dinp = dinp0, dw = dw0, db = db0, ref_dinp = dinp0, ref_dw = dw0, ref_db = db0;
    layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.view(i16),
                       weight.view(w16), mean.data(), rstd.data(), n, c);
    layernorm_backward(ref_dinp.data(), ref_dw.data(), ref_db.data(), dout.data(), inp.ref(i16),
                       weight.ref(w16), mean.data(), rstd.data(), n, c);
    expect_bits(dw, ref_dw, "dweight (+=)");  // (dinp not compared: see the top)
    expect_bits(db, ref_db, "dbias (+=)");
  }
}

TEST(Bf16Storage, RmsNorm) {
  constexpr int64_t n = 13, c = 100;
  const Input inp(n * c, 11, 1.f, 0.3f), weight(c, 12, 0.1f, 1.f);
  for (int mask = 0; mask < 4; ++mask) {
    const bool o16 = bit(mask, 0), w16 = bit(mask, 1);
    SCOPED_TRACE(combo({{"out", o16}, {"inp", false}, {"weight", w16}}));
    Output out(n * c, o16);
    std::vector<float> rstd(n, kNaN), ref(n * c, kNaN), ref_rstd(n, kNaN);
    rmsnorm_forward(out.view(), rstd.data(), inp.view(false), weight.view(w16), n, c, 1e-5f);
    rmsnorm_forward(ref.data(), ref_rstd.data(), inp.ref(false), weight.ref(w16), n, c, 1e-5f);
    expect_stored(out, ref, "out");
    expect_bits(rstd, ref_rstd, "rstd");
  }
  const std::vector<float> dout = normal(n * c, 13);
  std::vector<float> rstd(n), y(n * c);
  rmsnorm_forward(y.data(), rstd.data(), inp.ref(true), weight.ref(true), n, c, 1e-5f);
  const std::vector<float> dinp0 = normal(n * c, 14), dw0 = normal(c, 15);
  for (int mask = 1; mask < 4; ++mask) {
    const bool i16 = bit(mask, 0), w16 = bit(mask, 1);
    SCOPED_TRACE(combo({{"inp", i16}, {"weight", w16}}));
    auto dinp = dinp0, dw = dw0, ref_dinp = dinp0, ref_dw = dw0;
    rmsnorm_backward(dinp.data(), dw.data(), dout.data(), inp.view(i16), weight.view(w16),
                     rstd.data(), n, c);
    rmsnorm_backward(ref_dinp.data(), ref_dw.data(), dout.data(), inp.ref(i16), weight.ref(w16),
                     rstd.data(), n, c);
    expect_bits(dw, ref_dw, "dweight (+=)");  // (dinp not compared: see the top)
  }
}

TEST(Bf16Storage, Gelu) {
  constexpr int64_t n = 1037;
  const Input inp(n, 21, 2.f);
  const std::vector<float> dout = normal(n, 22);
  for (int mask = 0; mask < 4; ++mask) {
    const bool o16 = bit(mask, 0), i16 = bit(mask, 1);
    SCOPED_TRACE(combo({{"out", o16}, {"inp", i16}}));
    Output out(n, o16);
    std::vector<float> ref(n, kNaN);
    gelu_forward(out.view(), inp.view(i16), n);
    gelu_forward(ref.data(), inp.ref(i16), n);
    expect_stored(out, ref, "out");

    std::vector<float> dinp(n, kNaN), ref_dinp(n, kNaN);
    gelu_backward(dinp.data(), inp.view(i16), dout.data(), n);
    gelu_backward(ref_dinp.data(), inp.ref(i16), dout.data(), n);
    expect_bits(dinp, ref_dinp, "dinp");
  }
}

TEST(Bf16Storage, SwiGlu) {
  constexpr int64_t n = 13, f = 37;
  const Input in(n * 2 * f, 31, 2.f);
  const std::vector<float> dout = normal(n * f, 32);
  for (int mask = 0; mask < 4; ++mask) {
    const bool o16 = bit(mask, 0), i16 = bit(mask, 1);
    SCOPED_TRACE(combo({{"out", o16}, {"in", i16}}));
    Output out(n * f, o16);
    std::vector<float> ref(n * f, kNaN);
    swiglu_forward(out.view(), in.view(i16), n, f);
    swiglu_forward(ref.data(), in.ref(i16), n, f);
    expect_stored(out, ref, "out");

    std::vector<float> din(n * 2 * f, kNaN), ref_din(n * 2 * f, kNaN);
    swiglu_backward(din.data(), in.view(i16), dout.data(), n, f);
    swiglu_backward(ref_din.data(), in.ref(i16), dout.data(), n, f);
    expect_bits(din, ref_din, "din");
  }
}

DropoutSpec dropout_spec(float p, int64_t s, int64_t h) {
  DropoutSpec d;
  d.rng = RngStream::make(1234, "decoder.layers.1.hidden_dropout", /*step=*/7);
  d.p = p;
  d.s_global = s;
  d.h_global = h;
  d.sample0 = 5;
  return d;
}

TEST(Bf16Storage, DropoutAddAndDropout) {
  constexpr int64_t s = 5, b = 3, h = 37, n = s * b * h;
  const std::vector<float> x = normal(n, 41);
  const Input residual(n, 42);
  for (float p : {0.f, 0.1f}) {
    const DropoutSpec spec = dropout_spec(p, s, h);
    for (int mask = 0; mask < 4; ++mask) {
      const bool o16 = bit(mask, 0), r16 = bit(mask, 1);
      SCOPED_TRACE(combo({{"out", o16}, {"residual", r16}}) + "p=" + std::to_string(p));
      Output out(n, o16);
      std::vector<float> ref(n, kNaN);
      dropout_add_forward(out.view(), x.data(), residual.view(r16), s, b, h, spec);
      dropout_add_forward(ref.data(), x.data(), residual.ref(r16), s, b, h, spec);
      expect_stored(out, ref, "dropout_add_forward out");
    }
    for (bool o16 : {false, true}) {
      SCOPED_TRACE(combo({{"out", o16}}) + "p=" + std::to_string(p));
      Output out(n, o16);
      std::vector<float> ref(n, kNaN);
      dropout_forward(out.view(), x.data(), s, b, h, spec);
      dropout_forward(ref.data(), x.data(), s, b, h, spec);
      expect_stored(out, ref, "dropout_forward out");
    }
  }
}

TEST(Bf16Storage, HeadsToSbh) {
  constexpr int64_t s = 7, b = 2, a = 3, d = 13, n = s * b * a * d;
  const std::vector<float> x = normal(n, 51);
  Output out(n, /*bf16=*/true);
  std::vector<float> ref(n, kNaN);
  heads_to_sbh(out.view(), x.data(), s, b, a, d);
  heads_to_sbh(ref.data(), x.data(), s, b, a, d);
  expect_stored(out, ref, "out");
}

TEST(Bf16Storage, EmbeddingBf16Table) {
  constexpr int64_t n = 13, h = 37, row_start = 3, rows = 11;
  const Input table(rows * h, 61);
  std::vector<int32_t> ids(n);
  std::mt19937 gen(62);
  for (auto& id : ids) id = int32_t(gen() % 16);  // ids < 3 or > 13: another shard's rows
  const std::vector<float> out0 = normal(n * h, 63);
  for (bool accumulate : {false, true}) {
    SCOPED_TRACE(accumulate ? "accumulate" : "overwrite");
    auto out = out0, ref = out0;
    embedding_forward(out.data(), ids.data(), table.view(true), n, h, row_start, rows, accumulate);
    embedding_forward(ref.data(), ids.data(), table.ref(true), n, h, row_start, rows, accumulate);
    expect_bits(out, ref, "out");
  }
}

TEST(Bf16Storage, BiasAddBf16Bias) {
  constexpr int64_t n = 13, c = 37;
  const Input bias(c, 71);
  auto x = normal(n * c, 72), ref = x;
  bias_add(x.data(), bias.view(true), n, c);
  bias_add(ref.data(), bias.ref(true), n, c);
  expect_bits(x, ref, "x");
}

// bf16 math: the GEMM rounds its operands to bf16 and accumulates in fp32, so
// bf16-stored inputs equal fp32 inputs holding their values, and a bf16 output
// is the fp32 output rounded once.
TEST(Bf16Storage, LinearForwardInBf16Math) {
  constexpr int64_t n = 37, in = 50, out_features = 43;
  const Input inp(n * in, 81), weight(out_features * in, 82, 0.2f), bias(out_features, 83);
  Compute cm;
  cm.math = MathMode::kBF16;
  for (int with_bias = 0; with_bias < 2; ++with_bias)
    for (int mask = 0; mask < (with_bias ? 16 : 8); ++mask) {
      const bool o16 = bit(mask, 0), i16 = bit(mask, 1), w16 = bit(mask, 2), b16 = bit(mask, 3);
      SCOPED_TRACE(combo({{"out", o16}, {"inp", i16}, {"weight", w16}}) +
                   (with_bias ? std::string("bias=") + storage(b16) : "no bias"));
      const ReadView bias_view = with_bias ? bias.view(b16) : ReadView();
      const ReadView bias_ref = with_bias ? bias.ref(b16) : ReadView();
      Output out(n * out_features, o16);
      std::vector<float> ref(n * out_features, kNaN);
      linear_forward(out.view(), inp.view(i16), weight.view(w16), bias_view, n, in, out_features,
                     cm);
      linear_forward(ref.data(), inp.ref(i16), weight.ref(w16), bias_ref, n, in, out_features, cm);
      expect_stored(out, ref, "out");
    }
}

TEST(Bf16Storage, LinearBf16StorageNeedsBf16Math) {
  constexpr int64_t n = 5, in = 8, out_features = 6;
  const Input inp(n * in, 91), weight(out_features * in, 92);
  std::vector<uint16_t> out16(n * out_features);
  std::vector<float> out(n * out_features);
  EXPECT_THROW(linear_forward(out16.data(), inp.view(false), weight.view(false), nullptr, n, in,
                              out_features, Compute{}),
               Error);
  EXPECT_THROW(linear_forward(out.data(), inp.view(true), weight.view(false), nullptr, n, in,
                              out_features, Compute{}),
               Error);
}

AttentionDropout attention_dropout(float p) {
  AttentionDropout drop;
  drop.rng = RngStream::make(7, "attention_dropout", /*step=*/3);
  drop.p = p;
  drop.sample0 = 3;
  drop.a_global = 5;
  drop.head0 = 1;
  return drop;
}

// In bf16 math attention rounds q, k, v to bf16 for its matmuls: bf16-stored
// q, k, v (read without copies) give what fp32 ones holding their values give.
void check_attention(const AttentionDims& dm, float p) {
  const int64_t n = dm.b * dm.a * dm.s * dm.d, nl = dm.b * dm.a * dm.s;
  const Input q(n, 101), k(n, 102), v(n, 103);
  const std::vector<float> dctx = normal(n, 104);
  const AttentionDropout drop = attention_dropout(p);
  std::vector<float> ws(size_t(attention_workspace_floats(dm))), ref_ws(ws.size());
  for (int mask = 0; mask < 8; ++mask) {
    const bool q16 = bit(mask, 0), k16 = bit(mask, 1), v16 = bit(mask, 2);
    SCOPED_TRACE(combo({{"q", q16}, {"k", k16}, {"v", v16}}) + "s=" + std::to_string(dm.s) +
                 " p=" + std::to_string(p));
    std::vector<float> ctx(n, kNaN), lse(nl, kNaN), ref_ctx(n, kNaN), ref_lse(nl, kNaN);
    attention_forward(ctx.data(), lse.data(), q.view(q16), k.view(k16), v.view(v16), dm, drop,
                      ws.data());
    attention_forward(ref_ctx.data(), ref_lse.data(), q.ref(q16), k.ref(k16), v.ref(v16), dm, drop,
                      ref_ws.data());
    expect_bits(ctx, ref_ctx, "ctx");
    expect_bits(lse, ref_lse, "lse");

    std::vector<float> dq(n, kNaN), dk(n, kNaN), dv(n, kNaN);
    std::vector<float> ref_dq(n, kNaN), ref_dk(n, kNaN), ref_dv(n, kNaN);
    attention_backward(dq.data(), dk.data(), dv.data(), dctx.data(), q.view(q16), k.view(k16),
                       v.view(v16), ReadView(), ref_lse.data(), dm, drop, ws.data());
    attention_backward(ref_dq.data(), ref_dk.data(), ref_dv.data(), dctx.data(), q.ref(q16),
                       k.ref(k16), v.ref(v16), ref_ctx.data(), ref_lse.data(), dm, drop,
                       ref_ws.data());
    expect_bits(dq, ref_dq, "dq");
    expect_bits(dk, ref_dk, "dk");
    expect_bits(dv, ref_dv, "dv");
  }
}

TEST(Bf16Storage, AttentionInBf16Math) {
  AttentionDims dm{2, 2, 40, 16};
  dm.math = MathMode::kBF16;
  check_attention(dm, 0.f);
  check_attention(dm, 0.1f);
  AttentionDims two_blocks{1, 2, kAttentionBlockQ + 22, 16};  // dk, dv accumulate across blocks
  two_blocks.math = MathMode::kBF16;
  check_attention(two_blocks, 0.f);
}

TEST(Bf16Storage, AttentionBf16StorageNeedsBf16Math) {
  const AttentionDims dm{1, 2, 9, 8};  // fp32 math
  const int64_t n = dm.b * dm.a * dm.s * dm.d;
  const Input q(n, 111), k(n, 112), v(n, 113);
  std::vector<float> ctx(n), lse(dm.b * dm.a * dm.s), dq(n), dk(n), dv(n);
  std::vector<float> ws(size_t(attention_workspace_floats(dm)));
  EXPECT_THROW(attention_forward(ctx.data(), lse.data(), q.view(true), k.view(false), v.view(false),
                                 dm, {}, ws.data()),
               Error);
  EXPECT_THROW(
      attention_backward(dq.data(), dk.data(), dv.data(), ctx.data(), q.view(true), k.view(false),
                         v.view(false), ctx.data(), lse.data(), dm, {}, ws.data()),
      Error);
}

}  // namespace bf16_storage_test
}  // namespace mt
