// Helpers shared by the tensor-parallel equivalence tests: random inputs,
// row/column blocks of a dense matrix, and closeness relative to the largest
// magnitude of the reference.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace mt {

using Vec = std::vector<float>;

inline constexpr float kGarbage = 777.f;  // pre-fill of `=` outputs

// n values uniform in [-1, 1) from `seed`.
inline Vec random_vec(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  Vec v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

// Rows [r0, r0 + nr) of m (·, cols).
inline Vec rows_of(const Vec& m, int64_t cols, int64_t r0, int64_t nr) {
  return Vec(m.begin() + r0 * cols, m.begin() + (r0 + nr) * cols);
}

// Columns [c0, c0 + nc) of m (rows, cols), as a dense (rows, nc).
inline Vec cols_of(const Vec& m, int64_t rows, int64_t cols, int64_t c0, int64_t nc) {
  Vec out;
  for (int64_t i = 0; i < rows; ++i)
    out.insert(out.end(), m.begin() + i * cols + c0, m.begin() + i * cols + c0 + nc);
  return out;
}

// got ≈ want within rtol of want's largest magnitude.
inline void expect_close(const Vec& got, const Vec& want, const char* what, double rtol = 1e-5) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (float w : want) scale = std::max(scale, std::fabs(double(w)));
  const double tol = rtol * std::max(scale, 1e-30);
  int64_t bad = 0, worst = -1;
  double worst_err = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - double(want[i]));
    if (!(err <= tol)) {
      ++bad;
      if (!(err <= worst_err)) worst_err = err, worst = int64_t(i);
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " differ; worst at "
                    << worst << ": got " << (worst >= 0 ? got[size_t(worst)] : 0.f) << " want "
                    << (worst >= 0 ? want[size_t(worst)] : 0.f) << " (tol " << tol << ")";
}

}  // namespace mt
