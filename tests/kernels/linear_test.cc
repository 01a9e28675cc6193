// The linear layers (kernels/matmul.h): forward against a double reference,
// backward against finite differences, the bias gradient; in bf16/fp16 against
// the reference on operands rounded as the math mode rounds them, with weights,
// bias and activations stored in bf16 as a bf16 model holds them.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/precision.h"

namespace mt {
namespace linear_test {

using test::randn;
using test::rounded;

// Double reference of a linear layer: out (n, o) = inp (n, i) · Wᵀ + bias.
std::vector<double> linear_ref(const std::vector<double>& inp, const std::vector<double>& w,
                               const std::vector<double>& bias, int64_t n, int64_t in,
                               int64_t out) {
  std::vector<double> y(static_cast<size_t>(n * out));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = bias[size_t(o)];
      for (int64_t i = 0; i < in; ++i) acc += inp[size_t(r * in + i)] * w[size_t(o * in + i)];
      y[size_t(r * out + o)] = acc;
    }
  return y;
}

TEST(Linear, ForwardMatchesNaive) {
  const int64_t n = 10, in = 24, out = 18;
  auto inp = randn(n * in, "inp"), w = randn(out * in, "w"), bias = randn(out, "bias");
  std::vector<float> y(static_cast<size_t>(n * out));
  linear_forward(y.data(), inp.data(), w.data(), bias.data(), n, in, out);
  auto ref =
      linear_ref(test::to_double(inp), test::to_double(w), test::to_double(bias), n, in, out);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], ref[i], 1e-4) << i;
}

TEST(Linear, BackwardMatchesFiniteDifferences) {
  const int64_t n = 6, in = 9, out = 7;
  auto inp = randn(n * in, "inp"), w = randn(out * in, "w"), bias = randn(out, "bias");
  auto g = randn(n * out, "g");  // dL/dout for L = Σ out ⊙ g
  auto di = test::to_double(inp), dw = test::to_double(w), db = test::to_double(bias);
  auto loss = [&](const std::vector<double>& x, const std::vector<double>& wt,
                  const std::vector<double>& bs) {
    auto y = linear_ref(x, wt, bs, n, in, out);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += y[i] * g[i];
    return l;
  };
  auto num_inp = test::numeric_grad([&](const auto& x) { return loss(x, dw, db); }, di);
  auto num_w = test::numeric_grad([&](const auto& x) { return loss(di, x, db); }, dw);
  auto num_b = test::numeric_grad([&](const auto& x) { return loss(di, dw, x); }, db);

  // Parameter gradients accumulate (+=): start from non-zero values.
  const float kW0 = 0.25f, kB0 = -0.5f;
  std::vector<float> dinp(static_cast<size_t>(n * in), 123.f), dweight(w.size(), kW0),
      dbias(size_t(out), kB0);
  linear_backward(dinp.data(), dweight.data(), dbias.data(), g.data(), inp.data(), w.data(), n, in,
                  out);
  for (auto& x : dweight) x -= kW0;
  for (auto& x : dbias) x -= kB0;
  test::expect_grad_close(dinp, num_inp, 1e-4, 1e-4, "dinp");
  test::expect_grad_close(dweight, num_w, 1e-4, 1e-4, "dweight");
  test::expect_grad_close(dbias, num_b, 1e-4, 1e-4, "dbias");

  // accumulate_dinp adds; a null dinp / dbias is skipped.
  std::vector<float> dinp2(dinp);
  linear_backward(dinp2.data(), nullptr, nullptr, g.data(), inp.data(), w.data(), n, in, out,
                  /*accumulate_dinp=*/true);
  for (size_t i = 0; i < dinp.size(); ++i) EXPECT_NEAR(dinp2[i], 2 * dinp[i], 1e-4) << i;
}

// Expects got ≈ want within rtol·(1 + |want|) elementwise.
void expect_all_close(const std::vector<float>& got, const std::vector<double>& want, double rtol,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= rtol * (1 + std::fabs(want[i]))) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", expected " << want[i];
  EXPECT_EQ(bad, 0) << what;
}

class LinearMixed : public ::testing::TestWithParam<MathMode> {};

// Forward and both backward products on operands rounded as cm.math rounds
// them, accumulated in fp32: dweight onto its fp32 starting value (not rounded),
// dbias from the unrounded dout.
TEST_P(LinearMixed, ForwardAndBackwardMatchRoundedReference) {
  const MathMode math = GetParam();
  const int64_t n = 13, in = 24, out = 18;
  auto inp = randn(n * in, "inp"), w = randn(out * in, "w"), bias = randn(out, "bias");
  auto g = randn(n * out, "g");
  const auto ri = rounded(inp, math), rw = rounded(w, math), rg = rounded(g, math);
  Compute cm;
  cm.math = math;
  std::vector<float> y(static_cast<size_t>(n * out), std::nanf(""));
  linear_forward(y.data(), inp.data(), w.data(), bias.data(), n, in, out, cm);
  expect_all_close(y, linear_ref(test::to_double(ri), test::to_double(rw), test::to_double(bias),
                                 n, in, out), 1e-5, "out");

  const auto dw0 = randn(out * in, "dw0"), db0 = randn(out, "db0");
  std::vector<float> dinp(static_cast<size_t>(n * in), std::nanf("")), dw(dw0), db(db0);
  linear_backward(dinp.data(), dw.data(), db.data(), g.data(), inp.data(), w.data(), n, in, out,
                  false, cm);
  std::vector<double> ref_dinp(dinp.size(), 0.0), ref_dw(dw0.begin(), dw0.end()),
      ref_db(db0.begin(), db0.end());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < out; ++o) {
      const double go = rg[size_t(r * out + o)];
      ref_db[size_t(o)] += g[size_t(r * out + o)];
      for (int64_t i = 0; i < in; ++i) {
        ref_dinp[size_t(r * in + i)] += go * rw[size_t(o * in + i)];
        ref_dw[size_t(o * in + i)] += go * ri[size_t(r * in + i)];
      }
    }
  expect_all_close(dinp, ref_dinp, 1e-5, "dinp");
  expect_all_close(dw, ref_dw, 1e-5, "dweight");
  expect_all_close(db, ref_db, 1e-6, "dbias");
}

INSTANTIATE_TEST_SUITE_P(Math, LinearMixed, ::testing::Values(MathMode::kBF16, MathMode::kF16),
                         [](const ::testing::TestParamInfo<MathMode>& i) {
                           return std::string(math_mode_name(i.param));
                         });

// In bf16 a weight stored in bf16 (a bf16 model's) is read as stored — here
// deliberately bf16(2·W), to see it — and so is a bf16 bias (bf16(3·b));
// an fp32 weight is converted on the fly.
TEST(LinearMixedStorage, Bf16StoredWeightsAndBiasAreReadAsStored) {
  const int64_t n = 7, in = 16, out = 12;
  auto inp = randn(n * in, "inp"), w = randn(out * in, "w"), g = randn(n * out, "g");
  auto b = randn(out, "b");
  std::vector<float> w2(w), b3(b);
  for (float& x : w2) x *= 2;
  for (float& x : b3) x *= 3;
  std::vector<uint16_t> w16(w2.size()), b16(b3.size());
  f32_to_bf16(w16.data(), w2.data(), int64_t(w2.size()));
  f32_to_bf16(b16.data(), b3.data(), int64_t(b3.size()));
  Compute cm;
  cm.math = MathMode::kBF16;

  const auto ri = rounded(inp, MathMode::kBF16), rg = rounded(g, MathMode::kBF16);
  const auto rw2 = rounded(w2, MathMode::kBF16), rw = rounded(w, MathMode::kBF16);
  const auto rb3 = rounded(b3, MathMode::kBF16);
  const std::vector<double> zero_bias(static_cast<size_t>(out), 0.0);
  std::vector<float> y(static_cast<size_t>(n * out));
  linear_forward(y.data(), inp.data(), ReadView(w16.data()), ReadView(b16.data()), n, in, out, cm);
  expect_all_close(y, linear_ref(test::to_double(ri), test::to_double(rw2), test::to_double(rb3),
                                 n, in, out),
                   1e-5, "out from bf16 storage");
  linear_forward(y.data(), inp.data(), w.data(), nullptr, n, in, out, cm);  // fp32 storage
  expect_all_close(y, linear_ref(test::to_double(ri), test::to_double(rw), zero_bias, n, in, out),
                   1e-5, "out converted per call");
  std::vector<float> xb(y.size(), 0.5f);
  bias_add(xb.data(), ReadView(b16.data()), n, out);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < out; ++o)
      EXPECT_EQ(xb[size_t(r * out + o)], 0.5f + float(rb3[size_t(o)])) << r << "," << o;

  std::vector<float> dinp(static_cast<size_t>(n * in));
  linear_backward(dinp.data(), nullptr, nullptr, g.data(), inp.data(), ReadView(w16.data()), n,
                  in, out, false, cm);
  std::vector<double> ref(dinp.size(), 0.0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i)
        ref[size_t(r * in + i)] += double(rg[size_t(r * out + o)]) * rw2[size_t(o * in + i)];
  expect_all_close(dinp, ref, 1e-5, "dinp from bf16 storage");
  // A bf16-stored weight belongs to bf16 math only.
  EXPECT_THROW(linear_forward(y.data(), inp.data(), ReadView(w16.data()), nullptr, n, in, out),
               Error);
}

// A bf16 run's saved activations are bf16: the weight gradient then reads
// them (and dout, as stored or rounded once) in bf16, with or without dinp,
// accumulated onto the fp32 gradient (the VDPBF16PS kernel where built).
TEST(LinearMixedStorage, WeightGradientFromBf16Activations) {
  const int64_t n = 37, in = 40, out = 29;
  auto inp = randn(n * in, "inp"), w = randn(out * in, "w"), g = randn(n * out, "g");
  const auto dw0 = randn(out * in, "dw0"), db0 = randn(out, "db0");
  std::vector<uint16_t> inp16(inp.size()), g16(g.size());
  f32_to_bf16(inp16.data(), inp.data(), int64_t(inp.size()));
  f32_to_bf16(g16.data(), g.data(), int64_t(g.size()));
  const auto ri = rounded(inp, MathMode::kBF16), rg = rounded(g, MathMode::kBF16);
  std::vector<double> ref_dw(dw0.begin(), dw0.end());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i)
        ref_dw[size_t(o * in + i)] += double(rg[size_t(r * out + o)]) * ri[size_t(r * in + i)];
  Compute cm;
  cm.math = MathMode::kBF16;
  std::vector<float> dinp(static_cast<size_t>(n * in));
  {  // dout fp32 with a bias gradient, no dinp
    std::vector<float> dw(dw0), db(db0);
    linear_backward(nullptr, dw.data(), db.data(), g.data(), ReadView(inp16.data()), w.data(), n,
                    in, out, false, cm);
    expect_all_close(dw, ref_dw, 1e-5, "dweight, fp32 dout");
  }
  {  // dout stored in bf16, with dinp
    std::vector<float> dw(dw0);
    linear_backward(dinp.data(), dw.data(), nullptr, ReadView(g16.data()), ReadView(inp16.data()),
                    w.data(), n, in, out, false, cm);
    expect_all_close(dw, ref_dw, 1e-5, "dweight, bf16 dout");
  }
}

// fp32 on two threads, a small layer's input and weight gradients run side by
// side, one thread each (matmul.cc): each is the product one thread gives
// (bit for bit the one-thread run, where they run one after the other), dinp
// accumulating only when asked, dweight and dbias always.
TEST(Linear, GradientsSideBySideOnTwoThreadsAreOneThreadsProducts) {
  const int64_t n = 96, in = 64, out = 48;
  const auto inp = randn(n * in, "inp"), w = randn(out * in, "w"), g = randn(n * out, "g");
  const int threads = omp_get_max_threads();
  for (const bool accumulate : {false, true}) {
    auto run = [&](int t) {
      omp_set_num_threads(t);
      std::vector<float> dinp(static_cast<size_t>(n * in), 0.5f), dw(w.size(), 0.25f),
          db(size_t(out), -1.f);
      linear_backward(dinp.data(), dw.data(), db.data(), g.data(), inp.data(), w.data(), n, in,
                      out, accumulate);
      return std::vector<std::vector<float>>{dinp, dw, db};
    };
    const auto two = run(2), one = run(1);
    omp_set_num_threads(threads);
    for (size_t o = 0; o < 3; ++o)
      for (size_t i = 0; i < one[o].size(); ++i)
        ASSERT_EQ(two[o][i], one[o][i]) << "output " << o << " [" << i << "]";
    // And the products themselves: dinp (+)= g · W, dweight = 0.25 + gᵀ · inp.
    for (int64_t r = 0; r < n; r += 7)
      for (int64_t c = 0; c < in; c += 5) {
        double x = accumulate ? 0.5 : 0.0, y = 0.25;
        for (int64_t o = 0; o < out; ++o)
          x += double(g[size_t(r * out + o)]) * w[size_t(o * in + c)];
        EXPECT_NEAR(two[0][size_t(r * in + c)], x, 1e-4) << r << "," << c;
        if (r >= out) continue;
        for (int64_t k = 0; k < n; ++k)
          y += double(g[size_t(k * out + r)]) * inp[size_t(k * in + c)];
        EXPECT_NEAR(two[1][size_t(r * in + c)], y, 1e-4) << r << "," << c;
      }
  }
}

TEST(Linear, BiasBackwardIsColumnSumAndAccumulates) {
  const int64_t n = 37, c = 150;  // c spans several column chunks
  auto dout = randn(n * c, "dout");
  std::vector<float> dbias(static_cast<size_t>(c), 1.f);
  bias_backward(dbias.data(), dout.data(), n, c);
  for (int64_t j = 0; j < c; ++j) {
    double ref = 1.0;
    for (int64_t r = 0; r < n; ++r) ref += dout[size_t(r * c + j)];
    EXPECT_NEAR(dbias[size_t(j)], ref, 1e-4) << j;
  }
}

}  // namespace linear_test
}  // namespace mt
