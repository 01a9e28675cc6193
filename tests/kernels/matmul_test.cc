#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "kernel_test_util.h"

namespace mt {
namespace {

using test::randn;

// Naive double-precision C = A·B (+ bias) (+ C) following MatmulShape's
// storage rules; untouched entries of c (padding) are left as they are.
void naive_matmul(std::vector<double>& c, const std::vector<float>& a, const std::vector<float>& b,
                  const float* bias, const MatmulShape& s) {
  const int64_t lda = s.lda ? s.lda : (s.trans_a ? s.m : s.k);
  const int64_t ldb = s.ldb ? s.ldb : (s.trans_b ? s.k : s.n);
  const int64_t ldc = s.ldc ? s.ldc : s.n;
  const int64_t bsa = s.batch_stride_a ? s.batch_stride_a : (s.trans_a ? s.k : s.m) * lda;
  const int64_t bsb = s.batch_stride_b ? s.batch_stride_b : (s.trans_b ? s.n : s.k) * ldb;
  const int64_t bsc = s.batch_stride_c ? s.batch_stride_c : s.m * ldc;
  for (int64_t t = 0; t < s.batch; ++t)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double acc = bias ? double(bias[j]) : 0.0;
        for (int64_t p = 0; p < s.k; ++p) {
          const double av = a[size_t(t * bsa + (s.trans_a ? p * lda + i : i * lda + p))];
          const double bv = b[size_t(t * bsb + (s.trans_b ? j * ldb + p : p * ldb + j))];
          acc += av * bv;
        }
        double& out = c[size_t(t * bsc + i * ldc + j)];
        out = s.accumulate ? out + acc : acc;
      }
}

// Runs matmul on buffers of the sizes the strides imply and compares every
// element of C (including padding, which must stay untouched) with naive_matmul.
void check_matmul(const MatmulShape& s, bool with_bias, const char* what) {
  const int64_t lda = s.lda ? s.lda : (s.trans_a ? s.m : s.k);
  const int64_t ldb = s.ldb ? s.ldb : (s.trans_b ? s.k : s.n);
  const int64_t ldc = s.ldc ? s.ldc : s.n;
  const int64_t bsa = s.batch_stride_a ? s.batch_stride_a : (s.trans_a ? s.k : s.m) * lda;
  const int64_t bsb = s.batch_stride_b ? s.batch_stride_b : (s.trans_b ? s.n : s.k) * ldb;
  const int64_t bsc = s.batch_stride_c ? s.batch_stride_c : s.m * ldc;
  // Elements spanned by `batch` matrices of `rows` rows of `cols` (+ padding).
  auto extent = [&](int64_t bs, int64_t rows, int64_t ld, int64_t cols) {
    return (s.batch - 1) * bs + (rows - 1) * ld + cols;
  };
  std::vector<float> a = randn(extent(bsa, s.trans_a ? s.k : s.m, lda, s.trans_a ? s.m : s.k), "a");
  std::vector<float> b = randn(extent(bsb, s.trans_b ? s.n : s.k, ldb, s.trans_b ? s.k : s.n), "b");
  std::vector<float> bias = randn(s.n, "bias");
  std::vector<float> c = randn(extent(bsc, s.m, ldc, s.n), "c");
  std::vector<double> ref(c.begin(), c.end());
  naive_matmul(ref, a, b, with_bias ? bias.data() : nullptr, s);
  matmul(c.data(), a.data(), b.data(), with_bias ? bias.data() : nullptr, s);
  int bad = 0;
  for (size_t i = 0; i < c.size(); ++i)
    if (std::fabs(c[i] - ref[i]) > 1e-4 * (1 + std::fabs(ref[i])) && bad++ < 5)
      ADD_FAILURE() << what << ": c[" << i << "] = " << c[i] << ", expected " << ref[i];
  EXPECT_EQ(bad, 0) << what;
}

TEST(Matmul, PlainMatchesNaive) {
  MatmulShape s;
  s.m = 37;
  s.n = 29;
  s.k = 41;
  check_matmul(s, false, "plain");
}

TEST(Matmul, TransposedOperandsMatchNaive) {
  MatmulShape s;
  s.m = 23;
  s.n = 31;
  s.k = 19;
  s.trans_a = true;
  check_matmul(s, false, "trans_a");
  s.trans_a = false;
  s.trans_b = true;
  check_matmul(s, false, "trans_b");
  s.trans_a = true;
  check_matmul(s, false, "trans_a and trans_b");
}

TEST(Matmul, BatchedWithLeadingDimsAndBatchStrides) {
  // Sub-matrices of larger buffers, like the attention blocks of (b, a, s, d).
  MatmulShape s;
  s.batch = 5;
  s.m = 9;
  s.n = 13;
  s.k = 7;
  s.lda = 10;
  s.ldb = 16;
  s.ldc = 15;
  s.batch_stride_a = 9 * 10 + 6;
  s.batch_stride_b = 7 * 16 + 3;
  s.batch_stride_c = 9 * 15 + 4;
  check_matmul(s, false, "strided batch");
  // Batches interleaved inside the rows of C (batch stride < row stride).
  MatmulShape t;
  t.batch = 3;
  t.m = 6;
  t.n = 4;
  t.k = 5;
  t.trans_b = true;
  t.ldc = 3 * 4;
  t.batch_stride_c = 4;
  check_matmul(t, false, "interleaved C");
}

TEST(Matmul, BiasAndAccumulate) {
  MatmulShape s;
  s.m = 17;
  s.n = 33;
  s.k = 12;
  s.trans_b = true;
  check_matmul(s, true, "bias");
  s.accumulate = true;
  check_matmul(s, false, "accumulate");
  check_matmul(s, true, "bias + accumulate");
  s.batch = 3;
  s.trans_b = false;
  s.trans_a = true;
  check_matmul(s, true, "batched trans_a bias + accumulate");
}

TEST(Matmul, RejectsBadShapes) {
  std::vector<float> buf(64);
  MatmulShape s;
  s.m = 4;
  s.n = 4;
  s.k = 0;
  EXPECT_THROW(matmul(buf.data(), buf.data(), buf.data(), nullptr, s), Error);
  s.k = 4;
  s.lda = 2;  // shorter than a row of A
  EXPECT_THROW(matmul(buf.data(), buf.data(), buf.data(), nullptr, s), Error);
  s.lda = 0;
  EXPECT_THROW(matmul(nullptr, buf.data(), buf.data(), nullptr, s), Error);
}

TEST(Matmul, PrimitiveCacheDoesNotGrowForRepeatedShapes) {
  MatmulShape s;
  s.m = 11;
  s.n = 12;
  s.k = 13;
  std::vector<float> a(11 * 13, 1.f), b(13 * 12, 1.f), c(11 * 12), bias(12, 0.5f);
  matmul(c.data(), a.data(), b.data(), nullptr, s);
  const int64_t after_first = matmul_primitive_count();
  for (int i = 0; i < 3; ++i) matmul(c.data(), a.data(), b.data(), nullptr, s);
  EXPECT_EQ(matmul_primitive_count(), after_first);
  EXPECT_FLOAT_EQ(c[0], 13.f);
  // Explicit dense strides are the same primitive as 0 = dense.
  MatmulShape explicit_dense = s;
  explicit_dense.lda = 13;
  explicit_dense.ldc = 12;
  matmul(c.data(), a.data(), b.data(), nullptr, explicit_dense);
  EXPECT_EQ(matmul_primitive_count(), after_first);
  // Bias presence and accumulate are part of the key.
  matmul(c.data(), a.data(), b.data(), bias.data(), s);
  EXPECT_EQ(matmul_primitive_count(), after_first + 1);
  EXPECT_FLOAT_EQ(c[0], 13.5f);
  s.accumulate = true;
  matmul(c.data(), a.data(), b.data(), nullptr, s);
  matmul(c.data(), a.data(), b.data(), nullptr, s);
  EXPECT_EQ(matmul_primitive_count(), after_first + 2);
  EXPECT_FLOAT_EQ(c[0], 39.5f);
}

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

TEST(Matmul, PeakFlopsIsMeasured) {
  const double flops = measure_matmul_peak_flops(128);
  EXPECT_GT(flops, 1e8);  // any working CPU does > 0.1 GFLOP/s
  EXPECT_TRUE(std::isfinite(flops));
  EXPECT_THROW(measure_matmul_peak_flops(8), Error);
}

}  // namespace
}  // namespace mt
