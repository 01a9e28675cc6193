#include "kernels/cross_entropy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/kernel_test_util.h"

namespace mt {
namespace cross_entropy_test {

// Double reference: sum over rows of -log softmax(z)[target].
double loss_ref(const std::vector<double>& z, const std::vector<int32_t>& t, int64_t v,
                std::vector<double>* per_row = nullptr) {
  double total = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const double* r = z.data() + i * v;
    const double mx = *std::max_element(r, r + v);
    double s = 0;
    for (int64_t j = 0; j < v; ++j) s += std::exp(r[j] - mx);
    const double l = std::log(s) + mx - r[t[i]];
    if (per_row) per_row->push_back(l);
    total += l;
  }
  return total;
}

TEST(CrossEntropy, LossMatchesDoubleReferenceWithoutTouchingLogits) {
  const int64_t n = 6, v = 1000;
  auto z = test::randn(n * v, "ce.z", 3.f);
  for (int64_t j = 0; j < v; ++j) z[2 * v + j] += 1000.f;  // exp would overflow unshifted
  const std::vector<int32_t> t = {0, 999, 17, 500, 3, 3};
  std::vector<double> want;
  loss_ref(test::to_double(z), t, v, &want);
  const auto z0 = z;
  std::vector<float> losses(n);
  softmax_cross_entropy(losses.data(), z.data(), t.data(), n, v, 0.f);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(losses[i], want[i], 1e-5 * (1 + want[i]));
  EXPECT_EQ(z, z0) << "grad_scale == 0 must leave the logits unchanged";
  // Uniform logits: loss = log v exactly-ish.
  std::vector<float> flat(v, 0.25f);
  int32_t t0 = 42;
  float l;
  softmax_cross_entropy(&l, flat.data(), &t0, 1, v, 0.f);
  EXPECT_NEAR(l, std::log(double(v)), 1e-6);
}

// d(grad_scale * sum(losses)) / dz against central differences in double.
TEST(CrossEntropy, GradientFiniteDifference) {
  const int64_t n = 4, v = 37;
  const float grad_scale = 0.25f;  // e.g. 1 / n for a mean loss
  auto z = test::randn(n * v, "ceg.z", 2.f);
  const std::vector<int32_t> t = {5, 0, 36, 5};
  std::vector<double> want;
  loss_ref(test::to_double(z), t, v, &want);
  auto num = test::numeric_grad(
      [&](const std::vector<double>& zd) { return grad_scale * loss_ref(zd, t, v); },
      test::to_double(z));
  std::vector<float> losses(n);
  softmax_cross_entropy(losses.data(), z.data(), t.data(), n, v, grad_scale);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(losses[i], want[i], 1e-5 * (1 + want[i]));
  test::expect_grad_close(z, num, 1e-6, 1e-4, "dlogits");
  // Each row of softmax - onehot sums to zero.
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int64_t j = 0; j < v; ++j) s += z[i * v + j];
    EXPECT_NEAR(s, 0.0, 1e-6);
  }
}

// The fused rows (what one TP rank runs) and the three phases with their
// all-reduces left out (what a shard runs) give the same bits: losses and
// gradient, fp32 in place and bf16, over more columns than one sum block.
TEST(CrossEntropy, FusedRowsEqualThePhases) {
  const int64_t n = 5, v = 1300;
  const auto z = test::randn(n * v, "cef.z", 4.f);
  const std::vector<int32_t> t = {0, 1299, 512, 7, 7};
  for (bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16 gradient" : "fp32 gradient");
    auto fused = z, phased = z;
    std::vector<uint16_t> g_fused(size_t(n * v)), g_phased(size_t(n * v));
    std::vector<float> l_fused(n), l_phased(n), mx(n);
    std::vector<double> sum(n), target(n);
    const WriteView gf = bf16 ? WriteView(g_fused.data()) : WriteView(fused.data());
    const WriteView gp = bf16 ? WriteView(g_phased.data()) : WriteView(phased.data());
    cross_entropy_rows(l_fused.data(), fused.data(), gf, t.data(), n, v, 0.5f);
    cross_entropy_shard_max(mx.data(), phased.data(), n, v);
    cross_entropy_shard_sums(sum.data(), target.data(), phased.data(), mx.data(), t.data(), n, v,
                             0, true);
    cross_entropy_shard_finish(l_phased.data(), gp, phased.data(), sum.data(), target.data(),
                               t.data(), n, v, 0, 0.5f);
    EXPECT_EQ(l_fused, l_phased);
    if (bf16)
      EXPECT_EQ(g_fused, g_phased);
    else
      EXPECT_EQ(fused, phased);
  }
}

// A loss mask with per-row weights (--eod-mask-loss): the gradient of
// grad_scale * Σ_i w_i loss_i against central differences, masked rows all 0,
// fused rows and phases alike; the losses themselves are unweighted.
TEST(CrossEntropy, RowScalesWeighEachRowsGradient) {
  const int64_t n = 4, v = 37;
  const float grad_scale = 0.25f;
  const std::vector<float> w = {1.f, 0.f, 2.5f, 1.f};
  const auto z0 = test::randn(n * v, "cew.z", 2.f);
  const std::vector<int32_t> t = {5, 0, 36, 5};
  auto num = test::numeric_grad(
      [&](const std::vector<double>& zd) {
        std::vector<double> rows;
        loss_ref(zd, t, v, &rows);
        double l = 0;
        for (int64_t i = 0; i < n; ++i) l += grad_scale * w[size_t(i)] * rows[size_t(i)];
        return l;
      },
      test::to_double(z0));
  auto fused = z0, phased = z0;
  std::vector<float> l_fused(n), l_phased(n), mx(n);
  std::vector<double> sum(n), target(n), want;
  loss_ref(test::to_double(z0), t, v, &want);
  cross_entropy_rows(l_fused.data(), fused.data(), fused.data(), t.data(), n, v, grad_scale,
                     w.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(l_fused[i], want[i], 1e-5 * (1 + want[i]));
  test::expect_grad_close(fused, num, 1e-6, 1e-4, "dlogits");
  for (int64_t j = 0; j < v; ++j) ASSERT_EQ(fused[size_t(v + j)], 0.f) << "masked row, column " << j;
  cross_entropy_shard_max(mx.data(), phased.data(), n, v);
  cross_entropy_shard_sums(sum.data(), target.data(), phased.data(), mx.data(), t.data(), n, v, 0,
                           true);
  cross_entropy_shard_finish(l_phased.data(), phased.data(), phased.data(), sum.data(),
                             target.data(), t.data(), n, v, 0, grad_scale, w.data());
  EXPECT_EQ(l_fused, l_phased);
  EXPECT_EQ(fused, phased);
}

TEST(CrossEntropy, RejectsOutOfRangeTargetNamingIt) {
  const int64_t n = 3, v = 10;
  std::vector<float> z(n * v, 0.f), losses(n);
  for (int32_t bad : {10, -1}) {
    const std::vector<int32_t> t = {1, bad, 2};
    try {
      softmax_cross_entropy(losses.data(), z.data(), t.data(), n, v, 1.f);
      ADD_FAILURE() << "target " << bad << " was accepted";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("target id " + std::to_string(bad)), std::string::npos) << msg;
      EXPECT_NE(msg.find("row 1"), std::string::npos) << msg;
      EXPECT_NE(msg.find("[0, 10)"), std::string::npos) << msg;
    }
  }
  EXPECT_EQ(z, std::vector<float>(n * v, 0.f)) << "logits modified before the check";
}

}  // namespace cross_entropy_test
}  // namespace mt
