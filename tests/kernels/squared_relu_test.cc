#include "kernels/squared_relu.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/kernel_test_util.h"

namespace mt {
namespace squared_relu_test {

double squared_relu_ref(double x) { return x > 0 ? x * x : 0.0; }

TEST(SquaredRelu, ForwardIsReluSquared) {
  auto x = test::randn(1000, "srelu.x", 3.f);
  x.push_back(0.f);
  x.push_back(-5.f);
  x.push_back(3.f);
  std::vector<float> y(x.size());
  squared_relu_forward(y.data(), x.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_FLOAT_EQ(y[i], float(squared_relu_ref(x[i]))) << "x=" << x[i];
  EXPECT_EQ(y[1000], 0.f);
  EXPECT_EQ(y[1001], 0.f);
  EXPECT_EQ(y[1002], 9.f);
}

TEST(SquaredRelu, BackwardFiniteDifference) {
  const int64_t n = 500;
  auto x = test::randn(n, "srelug.x", 2.5f);
  auto dout = test::randn(n, "srelug.dout");
  std::vector<float> dx(n);
  squared_relu_backward(dx.data(), x.data(), dout.data(), n);
  auto xd = test::to_double(x);
  auto num = test::numeric_grad(
      [&](const std::vector<double>& v) {
        double s = 0;
        for (int64_t i = 0; i < n; ++i) s += dout[i] * squared_relu_ref(v[i]);
        return s;
      },
      xd);
  test::expect_grad_close(dx, num, 1e-5, 1e-4, "squared relu dinp");
}

TEST(SquaredRelu, BackwardMayAliasDoutAndIsZeroBelowZero) {
  const int64_t n = 64;
  auto x = test::randn(n, "srelua.x", 2.f), dout = test::randn(n, "srelua.dout");
  std::vector<float> separate(n);
  squared_relu_backward(separate.data(), x.data(), dout.data(), n);
  squared_relu_backward(dout.data(), x.data(), dout.data(), n);
  EXPECT_EQ(separate, dout);
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] <= 0.f) {
      EXPECT_EQ(separate[i], 0.f);
    }
  }
}

}  // namespace squared_relu_test
}  // namespace mt
