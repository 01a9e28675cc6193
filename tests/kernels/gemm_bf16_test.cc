#include "kernels/gemm_bf16.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernel_test_util.h"
#include "kernels/cpu_isa.h"

namespace mt {
namespace gemm_bf16_test {

// On a CPU with AVX512-BF16, on the kernels' AVX-512 path, the kernel must
// run every case below; elsewhere (or forced to AVX2, see ForcedAvx2Refuses)
// it must refuse them all.
bool has_kernel() { return cpu_has_avx512_bf16() && active_isa() == Isa::kAvx512; }

struct Case {
  int64_t m, n, k;
  bool trans_a, trans_b;
  int64_t pad;  // added to every row stride
  bool accumulate, bias, c_bf16;
};

std::string name(const Case& c) {
  return "m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
         (c.trans_a ? " Aᵀ" : " A") + (c.trans_b ? " Bᵀ" : " B") + " pad=" + std::to_string(c.pad) +
         (c.accumulate ? " +=" : " =") + (c.bias ? " +bias" : "") + (c.c_bf16 ? " C bf16" : "");
}

std::vector<uint16_t> bf16_of(const std::vector<float>& x) {
  std::vector<uint16_t> h(x.size());
  f32_to_bf16(h.data(), x.data(), int64_t(x.size()));
  return h;
}

struct Run {
  std::vector<float> c;
  std::vector<uint16_t> c16;
};

// Every entry of C (padding included, which must stay as it was) against a
// double-precision sum of the same bf16 values (fp32 sums: within 1e-6 of
// Σ|a·b| + |bias| + 1; a bf16 C within its rounding, 2^-8 relative);
// bitwise equal on 1 and 2 threads; and, summed over many products,
// different from the product of the unrounded fp32 operands.
void check(const Case& t) {
  const std::string what = name(t);
  const int64_t a_rows = t.trans_a ? t.k : t.m, a_cols = t.trans_a ? t.m : t.k;
  const int64_t b_rows = t.trans_b ? t.n : t.k, b_cols = t.trans_b ? t.k : t.n;
  Bf16Gemm g;
  g.m = t.m;
  g.n = t.n;
  g.k = t.k;
  g.trans_a = t.trans_a;
  g.trans_b = t.trans_b;
  g.lda = a_cols + t.pad;
  g.ldb = b_cols + t.pad;
  g.ldc = t.c_bf16 ? t.n : t.n + t.pad;
  g.accumulate = t.accumulate;
  const auto af = test::randn(a_rows * g.lda, "a " + what);
  const auto bf = test::randn(b_rows * g.ldb, "b " + what);
  const auto bias = test::randn(t.n, "bias " + what);
  const auto c0 = test::randn(t.m * g.ldc, "c " + what);
  const auto a = bf16_of(af), b = bf16_of(bf);
  g.a = a.data();
  g.b = b.data();
  g.bias = t.bias ? bias.data() : nullptr;
  if (!has_kernel()) {  // matmul keeps such products on oneDNN
    EXPECT_FALSE(gemm_bf16_supports(g)) << what;
    return;
  }
  ASSERT_TRUE(gemm_bf16_supports(g)) << what;
  auto run = [&](int threads) {
    Run r{c0, std::vector<uint16_t>(size_t(t.m * g.ldc), 0xFFFF)};
    Bf16Gemm h = g;
    h.c = t.c_bf16 ? nullptr : r.c.data();
    h.c_bf16 = t.c_bf16 ? r.c16.data() : nullptr;
    const int keep = omp_get_max_threads();
    omp_set_num_threads(threads);
    gemm_bf16(h);
    omp_set_num_threads(keep);
    return r;
  };
  const Run r1 = run(1), r2 = run(2);
  EXPECT_EQ(r1.c, r2.c) << what << ": the result depends on the thread count";
  EXPECT_EQ(r1.c16, r2.c16) << what << ": the result depends on the thread count";
  auto at = [](const std::vector<float>& x, int64_t ld, bool trans, int64_t i, int64_t j) {
    return double(x[size_t(trans ? j * ld + i : i * ld + j)]);
  };
  auto at16 = [](const std::vector<uint16_t>& x, int64_t ld, bool trans, int64_t i, int64_t j) {
    return double(f32_from_bf16(x[size_t(trans ? j * ld + i : i * ld + j)]));
  };
  int bad = 0;
  double off_exact = 0;
  for (int64_t i = 0; i < t.m; ++i)
    for (int64_t j = 0; j < g.ldc; ++j) {
      const size_t o = size_t(i * g.ldc + j);
      if (j >= t.n) {
        if (r1.c[o] != c0[o] && bad++ < 5) {
          ADD_FAILURE() << what << ": padding (" << i << "," << j << ") written";
        }
        continue;
      }
      double ref = (t.accumulate ? double(c0[o]) : 0.0) + (t.bias ? double(bias[size_t(j)]) : 0.0);
      double exact = ref, mag = std::fabs(ref) + 1;
      for (int64_t p = 0; p < t.k; ++p) {
        const double x = at16(a, g.lda, t.trans_a, i, p) * at16(b, g.ldb, t.trans_b, p, j);
        ref += x;
        mag += std::fabs(x);
        exact += at(af, g.lda, t.trans_a, i, p) * at(bf, g.ldb, t.trans_b, p, j);
      }
      const double got = t.c_bf16 ? double(f32_from_bf16(r1.c16[o])) : double(r1.c[o]);
      const double tol = t.c_bf16 ? 1e-6 * mag + std::fabs(ref) / 256 : 1e-6 * mag;
      if (!(std::fabs(got - ref) <= tol) && bad++ < 5)
        ADD_FAILURE() << what << ": c(" << i << "," << j << ") = " << got << ", expected " << ref;
      off_exact = std::max(off_exact, std::fabs(got - exact) / mag);
    }
  EXPECT_EQ(bad, 0) << what;
  if (t.k >= 64 && !t.c_bf16) {
    EXPECT_GT(off_exact, 1e-5) << what << ": equals the fp32 product";
  }
}

// Shapes that cross every blocking edge: register tiles of 12 rows and 32
// columns (row tails 1..11, column tails 1..31), 192-row thread blocks,
// 4096-column B blocks, k in one block (≤ 768) or several (k = 1100: two
// blocks of 275 pairs; odd k: a lone last value), few rows (threads split
// columns) or many (threads split rows); every storage order of A and B;
// row padding; accumulation, bias, bf16 C in one and in several k blocks.
TEST(GemmBf16, MatchesDoubleSumOfBf16Operands) {
  const Case cases[] = {
      {1, 1, 1, true, false, 0, false, false, false},
      {1, 1, 2, false, true, 0, false, false, false},
      {12, 32, 2, true, false, 0, false, false, false},
      {13, 33, 7, true, false, 0, true, false, false},
      {25, 47, 64, true, false, 5, true, false, false},
      {5, 300, 129, true, false, 0, false, true, false},
      {200, 70, 1100, true, false, 0, true, false, false},
      {400, 17, 515, true, false, 3, true, false, false},
      {37, 45, 62, false, false, 2, false, true, false},
      {37, 45, 62, false, true, 2, true, false, false},
      {37, 45, 62, true, true, 2, false, false, false},
      {230, 100, 768, false, true, 0, false, true, true},
      {230, 100, 1100, false, true, 0, false, true, true},
      {50, 4200, 40, false, true, 0, false, true, false},
      {300, 4130, 36, false, false, 2, true, false, false},
      {3, 130, 1100, false, false, 0, false, false, true},
  };
  for (const Case& c : cases) check(c);
}

TEST(GemmBf16, RejectsBadShapesAndUnsupportedLayouts) {
  std::vector<float> c(64);
  std::vector<uint16_t> a(64), b(64);
  Bf16Gemm g;
  g.m = g.n = g.k = 4;
  g.a = a.data();
  g.b = b.data();
  g.c = c.data();
  g.lda = g.ldb = g.ldc = 4;
  if (!has_kernel()) {  // no kernel: nothing is supported, a call is an internal error
    EXPECT_FALSE(gemm_bf16_supports(g));
    EXPECT_THROW(gemm_bf16(g), Error);
    return;
  }
  gemm_bf16(g);
  Bf16Gemm bad = g;
  bad.m = 0;
  EXPECT_THROW(gemm_bf16(bad), Error);
  bad = g;
  bad.lda = 3;
  EXPECT_THROW(gemm_bf16(bad), Error);
  bad = g;
  bad.c_bf16 = reinterpret_cast<uint16_t*>(c.data());
  bad.accumulate = true;
  EXPECT_THROW(gemm_bf16(bad), Error);
  // k contiguous in A needs whole pairs: an odd k is for oneDNN.
  bad = g;
  bad.k = 3;
  bad.lda = 3;
  EXPECT_FALSE(gemm_bf16_supports(bad));
  bad.trans_a = true;
  bad.lda = 4;
  EXPECT_TRUE(gemm_bf16_supports(bad));
  bad.trans_b = true;
  EXPECT_FALSE(gemm_bf16_supports(bad));
}

// Below the AVX-512 path (an AVX2-only CPU, or MT_ISA=avx2) every product
// is refused, so matmul keeps it on oneDNN.
TEST(GemmBf16, RefusedBelowTheAvx512Path) {
  std::vector<uint16_t> a(64), b(64);
  Bf16Gemm g;
  g.m = g.n = g.k = 4;
  g.a = a.data();
  g.b = b.data();
  g.lda = g.ldb = g.ldc = 4;
  test::for_each_isa([&](Isa isa) {
    if (isa < Isa::kAvx512) {
      EXPECT_FALSE(gemm_bf16_supports(g));
    }
  });
}

}  // namespace gemm_bf16_test
}  // namespace mt
