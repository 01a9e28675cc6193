#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <array>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/gemm_bf16.h"
#include "kernel_test_util.h"

namespace mt {
namespace matmul_test {

using test::randn;
using test::rounded;

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
// element of C (including padding, which must stay untouched) with naive_matmul
// on the operands rounded as s.math rounds them (fp32 accumulation: 1e-5
// relative in bf16/fp16). In bf16/fp16 the result must also differ from the
// unrounded product, so a path that silently computes in fp32 fails. With
// b_as_bf16, B is passed only as its bf16 twin (b itself is NaN); a_as_bf16
// likewise for A.
void check_matmul(const MatmulShape& s, bool with_bias, const char* what, bool b_as_bf16 = false,
                  bool a_as_bf16 = false) {
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
  std::vector<double> ref(c.begin(), c.end()), exact(c.begin(), c.end());
  naive_matmul(ref, rounded(a, s.math), rounded(b, s.math), with_bias ? bias.data() : nullptr, s);
  naive_matmul(exact, a, b, with_bias ? bias.data() : nullptr, s);
  std::vector<uint16_t> a16(a.size()), b16(b.size());
  f32_to_bf16(a16.data(), a.data(), int64_t(a.size()));
  f32_to_bf16(b16.data(), b.data(), int64_t(b.size()));
  if (a_as_bf16) std::fill(a.begin(), a.end(), std::nanf(""));
  if (b_as_bf16) std::fill(b.begin(), b.end(), std::nanf(""));
  matmul(c.data(), a.data(), b.data(), with_bias ? bias.data() : nullptr, s,
         b_as_bf16 ? b16.data() : nullptr, a_as_bf16 ? a16.data() : nullptr);
  const double rtol = s.math == MathMode::kF32 ? 1e-4 : 1e-5;
  int bad = 0;
  double off_exact = 0;  // largest relative distance from the unrounded product
  for (size_t i = 0; i < c.size(); ++i) {
    if (!(std::fabs(c[i] - ref[i]) <= rtol * (1 + std::fabs(ref[i]))) && bad++ < 5)
      ADD_FAILURE() << what << " (" << math_mode_name(s.math) << "): c[" << i << "] = " << c[i]
                    << ", expected " << ref[i];
    off_exact = std::max(off_exact, std::fabs(c[i] - exact[i]) / (1 + std::fabs(exact[i])));
  }
  EXPECT_EQ(bad, 0) << what << " (" << math_mode_name(s.math) << ")";
  if (s.math != MathMode::kF32) {
    EXPECT_GT(off_exact, 10 * rtol) << what << ": " << math_mode_name(s.math)
                                    << " result equals the fp32 one; operands were not rounded";
  }
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

// An unbatched product with neither a bias nor a transposed B (the linear
// layers' input and weight gradients) runs on oneDNN's sgemm: no primitive is
// created for it, and the numbers are the same as every other route's, in
// every math mode, plain or accumulating, with A transposed or not, with B's
// rows packed (ldb = n, also 2560: a multiple of 256 that the brgemm primitive
// read slowly) or wider apart, and with C's padding and prior contents (NaN
// where C is overwritten) as the other routes treat them.
TEST(Matmul, GradientShapesRunOnSgemmWithTheSameResult) {
  for (MathMode math : {MathMode::kF32, MathMode::kF16, MathMode::kBF16}) {
    // bf16 with bf16 instructions has its own routes (gemm_bf16.h, the bf16 primitive).
    const bool sgemm = math != MathMode::kBF16 || !matmul_bf16_native();
    MatmulShape s;
    s.m = 5;
    s.n = 2560;
    s.k = 64;
    s.math = math;
    const int64_t before = matmul_primitive_count();
    check_matmul(s, false, "ldb 2560");
    s.trans_a = true;
    s.accumulate = true;
    check_matmul(s, false, "trans_a, accumulate");
    s.ldb = 2600;
    s.ldc = 2570;
    check_matmul(s, false, "ldb 2600, ldc 2570");
    s.trans_a = false;
    s.accumulate = false;
    s.lda = 70;
    check_matmul(s, false, "lda 70");
    if (sgemm) {
      EXPECT_EQ(matmul_primitive_count(), before) << math_mode_name(math);
    }
    // beta = 0: a NaN already in C must not leak into the product.
    std::vector<float> a(5 * 64, 0.5f), b(64 * 8, 0.25f), c(5 * 8, std::nanf(""));
    MatmulShape t;
    t.m = 5;
    t.n = 8;
    t.k = 64;
    t.math = math;
    matmul(c.data(), a.data(), b.data(), nullptr, t);
    for (float x : c) EXPECT_EQ(x, 8.f) << math_mode_name(math);
  }
  // A bias, a transposed B or a batch keep the primitive.
  MatmulShape s;
  s.m = 6;
  s.n = 7;
  s.k = 9;
  std::vector<float> a(2 * 6 * 9, 1.f), b(2 * 9 * 7, 1.f), c(2 * 6 * 7), bias(7, 0.5f);
  int64_t count = matmul_primitive_count();
  matmul(c.data(), a.data(), b.data(), bias.data(), s);
  EXPECT_EQ(matmul_primitive_count(), ++count);
  s.trans_b = true;
  matmul(c.data(), a.data(), b.data(), nullptr, s);
  EXPECT_EQ(matmul_primitive_count(), ++count);
  s.trans_b = false;
  s.batch = 2;
  matmul(c.data(), a.data(), b.data(), nullptr, s);
  EXPECT_EQ(matmul_primitive_count(), ++count);
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

// (B transposed: products without a bias and with a plain B run on sgemm.)
TEST(Matmul, PrimitiveCacheDoesNotGrowForRepeatedShapes) {
  MatmulShape s;
  s.m = 11;
  s.n = 12;
  s.k = 13;
  s.trans_b = true;
  std::vector<float> a(11 * 13, 1.f), b(13 * 12, 1.f), c(11 * 12), bias(12, 0.5f);
  matmul(c.data(), a.data(), b.data(), nullptr, s);
  const int64_t after_first = matmul_primitive_count();
  for (int i = 0; i < 3; ++i) matmul(c.data(), a.data(), b.data(), nullptr, s);
  EXPECT_EQ(matmul_primitive_count(), after_first);
  EXPECT_FLOAT_EQ(c[0], 13.f);
  // Explicit dense strides are the same primitive as 0 = dense.
  MatmulShape explicit_dense = s;
  explicit_dense.lda = 13;
  explicit_dense.ldb = 13;
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

// ---- Mixed precision: bf16 (oneDNN bf16 primitive) and fp16 (emulated) ----

class MatmulMixed : public ::testing::TestWithParam<MathMode> {};

// (37, 53, 29): an odd k, which oneDNN 2.6's AMX bf16 kernel (brg:avx512_core_amx_bf16)
// multiplied wrongly with a transposed B on an AMX CPU (relative error ~1): matmul.cc
// keeps oneDNN below AMX; this case checks it wherever the tests run.
TEST_P(MatmulMixed, PlainAndTransposedMatchRoundedReference) {
  for (const auto [m, n, k] : {std::array<int64_t, 3>{37, 29, 41}, {37, 53, 29}})
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE("m n k = " + std::to_string(m) + " " + std::to_string(n) + " " +
                   std::to_string(k));
      MatmulShape s;
      s.m = m;
      s.n = n;
      s.k = k;
      s.trans_a = ta;
      s.trans_b = tb;
      s.math = GetParam();
      check_matmul(s, false, ta ? (tb ? "trans_a trans_b" : "trans_a") : (tb ? "trans_b" : "plain"));
      if (s.math == MathMode::kBF16) {
        check_matmul(s, false, "B given in bf16", true);
        check_matmul(s, false, "A given in bf16", false, true);
        check_matmul(s, false, "A and B given in bf16", true, true);
      }
    }
}

TEST_P(MatmulMixed, BiasAndAccumulateMatchRoundedReference) {
  MatmulShape s;
  s.m = 17;
  s.n = 33;
  s.k = 12;
  s.trans_b = true;
  s.math = GetParam();
  check_matmul(s, true, "bias");
  s.accumulate = true;
  check_matmul(s, false, "accumulate");
  check_matmul(s, true, "bias + accumulate");
  if (s.math == MathMode::kBF16) check_matmul(s, true, "bias + accumulate, B in bf16", true);
  s.batch = 3;
  s.trans_b = false;
  s.trans_a = true;
  check_matmul(s, true, "batched trans_a bias + accumulate");
}

TEST_P(MatmulMixed, BatchedStridedMatchRoundedReference) {
  const MathMode math = GetParam();
  MatmulShape s;  // sub-matrices of larger buffers, gaps everywhere
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
  s.math = math;
  check_matmul(s, false, "strided batch");
  if (math == MathMode::kBF16) check_matmul(s, false, "strided batch, A and B in bf16", true, true);
  MatmulShape t;  // batches interleaved inside the rows of A and C (batch stride < row stride)
  t.batch = 3;
  t.m = 6;
  t.n = 4;
  t.k = 5;
  t.trans_b = true;
  t.lda = 3 * 5;
  t.batch_stride_a = 5;
  t.ldc = 3 * 4;
  t.batch_stride_c = 4;
  t.math = math;
  check_matmul(t, false, "interleaved A and C");
  if (math == MathMode::kBF16) check_matmul(t, false, "interleaved A in bf16", false, true);
  // The three attention products on (bh, s, d) = (6, 40, 8), query block [16, 28):
  // S = q_blk · k[0:28]ᵀ, ctx_blk = P · v[0:28], dk[0:28] += dSᵀ · q_blk.
  const int64_t seq = 40, d = 8, bq = 12, kv = 28;
  MatmulShape qk;
  qk.batch = 6;
  qk.m = bq;
  qk.n = kv;
  qk.k = d;
  qk.trans_b = true;
  qk.batch_stride_a = seq * d;
  qk.batch_stride_b = seq * d;
  qk.math = math;
  check_matmul(qk, false, "attention q·kᵀ");
  MatmulShape pv;
  pv.batch = 6;
  pv.m = bq;
  pv.n = d;
  pv.k = kv;
  pv.batch_stride_b = seq * d;
  pv.batch_stride_c = seq * d;
  pv.math = math;
  check_matmul(pv, false, "attention P·v");
  MatmulShape dk;
  dk.batch = 6;
  dk.m = kv;
  dk.n = d;
  dk.k = bq;
  dk.trans_a = true;
  dk.batch_stride_b = seq * d;
  dk.batch_stride_c = seq * d;
  dk.accumulate = true;
  dk.math = math;
  check_matmul(dk, false, "attention dSᵀ·q accumulate");
  if (math == MathMode::kBF16) {  // as attention runs them: both operands in bf16
    check_matmul(qk, false, "attention q·kᵀ, bf16 operands", true, true);
    check_matmul(pv, false, "attention P·v, bf16 operands", true, true);
    check_matmul(dk, false, "attention dSᵀ·q accumulate, bf16 operands", true, true);
  }
}

INSTANTIATE_TEST_SUITE_P(Math, MatmulMixed, ::testing::Values(MathMode::kBF16, MathMode::kF16),
                         [](const ::testing::TestParamInfo<MathMode>& i) {
                           return std::string(math_mode_name(i.param));
                         });

TEST(MatmulMixedCache, MathModeIsPartOfTheKeyAndScratchIsReused) {
  MatmulShape s;  // B transposed: the primitive route
  s.m = 19;
  s.n = 21;
  s.k = 23;
  s.trans_b = true;
  std::vector<float> a(19 * 23, 1.5f), b(23 * 21, 0.5f), c(19 * 21);
  matmul(c.data(), a.data(), b.data(), nullptr, s);
  const int64_t base = matmul_primitive_count();
  // Without native bf16 (no bf16 instructions) the bf16 product is the fp32
  // primitive's, on rounded operands: no primitive of its own.
  const int64_t bf16_own = matmul_bf16_native() ? 1 : 0;
  s.math = MathMode::kBF16;
  matmul(c.data(), a.data(), b.data(), nullptr, s);
  EXPECT_EQ(matmul_primitive_count(), base + bf16_own);
  matmul(c.data(), a.data(), b.data(), nullptr, s);
  EXPECT_EQ(matmul_primitive_count(), base + bf16_own);
  EXPECT_FLOAT_EQ(c[0], 23 * 0.75f);  // 1.5 and 0.5 are exact in bf16
  s.math = MathMode::kF16;
  matmul(c.data(), a.data(), b.data(), nullptr, s);
  EXPECT_EQ(matmul_primitive_count(), base + bf16_own + 1);
  EXPECT_FLOAT_EQ(c[0], 23 * 0.75f);

  // Scratch grows to the largest operands seen, then is reused.
  MatmulShape big;
  big.m = big.n = big.k = 300;
  big.math = MathMode::kF16;  // fp32 scratch: the larger of the two modes
  std::vector<float> x(300 * 300, 0.25f), y(300 * 300);
  matmul(y.data(), x.data(), x.data(), nullptr, big);
  // The operand scratch, without the VDPBF16PS kernel's packing scratch
  // (which the bf16 products below may grow once, then reuse).
  auto operand_scratch = [] { return matmul_scratch_bytes() - gemm_bf16_scratch_bytes(); };
  const int64_t grown = operand_scratch();
  EXPECT_GE(grown, int64_t(2 * 300 * 300 * sizeof(float)));
  matmul(c.data(), a.data(), b.data(), nullptr, s);
  big.math = MathMode::kBF16;
  matmul(y.data(), x.data(), x.data(), nullptr, big);
  const int64_t all = matmul_scratch_bytes();
  for (int i = 0; i < 3; ++i) matmul(y.data(), x.data(), x.data(), nullptr, big);
  EXPECT_EQ(operand_scratch(), grown);
  EXPECT_EQ(matmul_scratch_bytes(), all);
  EXPECT_FLOAT_EQ(y[0], 300 * 0.0625f);
}

TEST(MatmulMixedCache, BBf16IsUsedOnlyInBf16Mode) {
  MatmulShape s;
  s.m = 4;
  s.n = 5;
  s.k = 6;
  std::vector<float> a(4 * 6, 1.f), b(6 * 5, 2.f), c(4 * 5);
  std::vector<uint16_t> b16(6 * 5, bf16_from_f32(3.f));  // a different B
  s.math = MathMode::kBF16;
  matmul(c.data(), a.data(), b.data(), nullptr, s, b16.data());
  EXPECT_FLOAT_EQ(c[0], 18.f);
  matmul(c.data(), a.data(), nullptr, nullptr, s, b16.data());  // b may be null then
  EXPECT_FLOAT_EQ(c[0], 18.f);
  for (MathMode m : {MathMode::kF32, MathMode::kF16}) {
    s.math = m;
    matmul(c.data(), a.data(), b.data(), nullptr, s, b16.data());
    EXPECT_FLOAT_EQ(c[0], 12.f) << math_mode_name(m);
    EXPECT_THROW(matmul(c.data(), a.data(), nullptr, nullptr, s, b16.data()), Error);
  }
}

// The peak is the best of its shapes (a structural check, no timing bound):
// 2048^3, the wide 4096x2048x1024 and the model's linear with its rows cut to
// 2048^3's FLOPs; every shape measured in every round, the result their max.
TEST(Matmul, PeakIsTheBestOfItsShapes) {
  const std::vector<PeakShape> big = matmul_peak_shapes(2048, {8192, 3072, 768});
  ASSERT_EQ(big.size(), 3u);
  EXPECT_EQ(big[0].m * big[0].n * big[0].k, int64_t(2048) * 2048 * 2048);
  EXPECT_EQ(big[1].m, 4096);
  EXPECT_EQ(big[1].n, 2048);
  EXPECT_EQ(big[1].k, 1024);
  EXPECT_EQ(big[2].n, 3072);
  EXPECT_EQ(big[2].k, 768);
  EXPECT_EQ(big[2].m % 64, 0);
  EXPECT_LE(big[2].m * big[2].n * big[2].k, int64_t(2048) * 2048 * 2048);
  EXPECT_GT(big[2].m, 3000);  // cut, not dropped
  EXPECT_EQ(matmul_peak_shapes(2048).size(), 2u);  // no model: the two
  EXPECT_EQ(matmul_peak_shapes(2048, {256, 128, 64})[2].m, 256);  // small: as given
  for (const MathMode math : {MathMode::kF32, MathMode::kBF16}) {
    const std::vector<PeakShape> shapes = matmul_peak_shapes(128, {96, 80, 48});
    const PeakMeasurement m = measure_matmul_peak(shapes, math, 0.05);
    ASSERT_EQ(m.shape_flops.size(), 3u);
    EXPECT_GE(m.rounds, 2);
    EXPECT_LE(m.rounds, 100);
    double best = 0;
    for (double f : m.shape_flops) {
      EXPECT_GT(f, 1e6);
      EXPECT_TRUE(std::isfinite(f));
      best = std::max(best, f);
    }
    EXPECT_EQ(m.flops, best);
    EXPECT_GT(m.median_ratio, 0.0);  // a median of rates that include the best
    EXPECT_LE(m.median_ratio, 1.0);
    EXPECT_NE(m.describe().find("128x128x128 "), std::string::npos) << m.describe();
    EXPECT_NE(m.describe().find("96x80x48 "), std::string::npos) << m.describe();
  }
}

TEST(Matmul, PeakFlopsIsMeasured) {
  const double flops = measure_matmul_peak_flops(128);
  EXPECT_GT(flops, 1e8);  // any working CPU does > 0.1 GFLOP/s
  EXPECT_TRUE(std::isfinite(flops));
  EXPECT_THROW(measure_matmul_peak_flops(8), Error);
  const double bf16 = measure_matmul_peak_flops(128, MathMode::kBF16);
  EXPECT_GT(bf16, 1e8);
  EXPECT_TRUE(std::isfinite(bf16));
}

}  // namespace matmul_test
}  // namespace mt
