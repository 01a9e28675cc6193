// Grouped linear layers (an MoE rank's experts as one batched product): each
// group equals linear_forward / linear_backward on its own rows and weight,
// fp32 and bf16, with a weight stride that is not the weight's size (the
// experts' weights sit apart in the flat parameter buffer).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/precision.h"

namespace mt {
namespace grouped_linear_test {

using test::randn;

double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0, scale = 1e-30;
  for (float x : a) scale = std::max(scale, double(std::abs(x)));
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - b[i]));
  return worst / scale;
}

class GroupedLinear : public ::testing::TestWithParam<MathMode> {};

TEST_P(GroupedLinear, EachGroupIsItsOwnLinear) {
  const MathMode math = GetParam();
  const bool bf16 = math == MathMode::kBF16;
  const int64_t groups = 3, rows = 24, in = 16, out = 12, stride = out * in + 32;
  const Compute cm{math};
  std::vector<float> x = randn(groups * rows * in, "x");
  std::vector<float> w = randn(groups * stride, "w", 0.3f);
  std::vector<float> dy = randn(groups * rows * out, "dy");
  // bf16 runs store activations and weights in bf16.
  std::vector<uint16_t> x16(x.size()), w16(w.size());
  f32_to_bf16(x16.data(), x.data(), int64_t(x.size()));
  f32_to_bf16(w16.data(), w.data(), int64_t(w.size()));
  const ReadView xv = bf16 ? ReadView(x16.data()) : ReadView(x.data());
  const ReadView wv = bf16 ? ReadView(w16.data()) : ReadView(w.data());

  std::vector<float> y(size_t(groups * rows * out)), y_ref(y.size());
  grouped_linear_forward(y.data(), xv, wv, stride, groups, rows, in, out, cm);
  std::vector<float> dx(size_t(groups * rows * in)), dx_ref(dx.size());
  std::vector<float> dw(size_t(groups * stride), 0.5f), dw_ref(dw);
  grouped_linear_backward(dx.data(), dw.data(), stride, dy.data(), xv, wv, stride, groups, rows, in,
                          out, cm);
  for (int64_t g = 0; g < groups; ++g) {
    linear_forward(y_ref.data() + g * rows * out, xv.at(g * rows * in), wv.at(g * stride), nullptr,
                   rows, in, out, cm);
    linear_backward(dx_ref.data() + g * rows * in, dw_ref.data() + g * stride, nullptr,
                    dy.data() + g * rows * out, xv.at(g * rows * in), wv.at(g * stride), rows, in,
                    out, false, cm);
  }
  const double tol = bf16 ? 1e-3 : 1e-6;  // bf16: the same operands, other summation orders
  EXPECT_LT(max_rel(y_ref, y), tol);
  EXPECT_LT(max_rel(dx_ref, dx), tol);
  EXPECT_LT(max_rel(dw_ref, dw), tol);
  // The gaps between the weights' gradients are untouched (accumulate: 0.5 stays).
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t i = out * in; i < stride; ++i) EXPECT_EQ(dw[size_t(g * stride + i)], 0.5f);
  EXPECT_THROW(grouped_linear_forward(y.data(), xv, wv, out * in - 1, groups, rows, in, out, cm),
               Error);
}

INSTANTIATE_TEST_SUITE_P(Math, GroupedLinear, ::testing::Values(MathMode::kF32, MathMode::kBF16));

}  // namespace grouped_linear_test
}  // namespace mt
