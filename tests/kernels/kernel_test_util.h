// Helpers shared by the kernel tests: deterministic random inputs and a
// finite-difference gradient checker on a double-precision reference.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "core/rng.h"
#include "kernels/cpu_isa.h"
#include "kernels/precision.h"

namespace mt {
// Test names and failure messages print math modes by name.
inline void PrintTo(MathMode m, std::ostream* os) { *os << math_mode_name(m); }
}  // namespace mt

namespace mt::test {

// n standard-normal floats (times scale, plus shift), keyed by name.
inline std::vector<float> randn(int64_t n, std::string_view name, float scale = 1.f,
                                float shift = 0.f) {
  RngStream r = RngStream::make(42, name);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[size_t(i)] = shift + scale * r.normal(uint64_t(i));
  return x;
}

// The operand values a GEMM in `math` computes with.
inline std::vector<float> rounded(const std::vector<float>& x, MathMode math) {
  std::vector<float> y(x);
  if (math == MathMode::kBF16) {
    std::vector<uint16_t> h(x.size());
    f32_to_bf16(h.data(), x.data(), int64_t(x.size()));
    bf16_to_f32(y.data(), h.data(), int64_t(h.size()));
  } else if (math == MathMode::kF16) {
    round_to_f16(y.data(), x.data(), int64_t(x.size()));
  }
  return y;
}

inline std::vector<double> to_double(const std::vector<float>& x) {
  return std::vector<double>(x.begin(), x.end());
}

// Sum of a[i] * b[i] in double (the norms' loss: a fixed weighting of the output).
inline double dot(const std::vector<double>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Central differences of a scalar double function f at x (each coordinate).
inline std::vector<double> numeric_grad(const std::function<double(const std::vector<double>&)>& f,
                                        std::vector<double> x, double step = 1e-5) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + step;
    const double fp = f(x);
    x[i] = keep - step;
    const double fm = f(x);
    x[i] = keep;
    g[i] = (fp - fm) / (2 * step);
  }
  return g;
}

// Expects |analytic - numeric| <= atol + rtol * |numeric| elementwise, and that
// the gradient is not trivially zero (so a kernel that writes nothing fails).
inline void expect_grad_close(const std::vector<float>& analytic,
                              const std::vector<double>& numeric, double atol, double rtol,
                              const std::string& what) {
  ASSERT_EQ(analytic.size(), numeric.size()) << what;
  double norm = 0;
  int bad = 0;
  for (size_t i = 0; i < numeric.size(); ++i) {
    norm += numeric[i] * numeric[i];
    const double err = std::fabs(double(analytic[i]) - numeric[i]);
    if (err > atol + rtol * std::fabs(numeric[i]) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: analytic " << analytic[i] << " vs numeric "
                    << numeric[i];
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << numeric.size() << " entries differ";
  EXPECT_GT(norm, 1e-6) << what << ": reference gradient is ~0, the test checks nothing";
}

// Runs body(isa) once per CPU path of the kernels this machine has (scalar,
// AVX2, and AVX-512 where present; cpu_isa.h) with that path forced, naming
// it in failures; the choice before is restored.
inline void for_each_isa(const std::function<void(Isa)>& body) {
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE(std::string("isa=") + isa_name(isa));
    struct Restore {
      Isa previous;
      ~Restore() { set_isa_for_testing(previous); }
    } restore{set_isa_for_testing(isa)};
    body(isa);
  }
}

}  // namespace mt::test
