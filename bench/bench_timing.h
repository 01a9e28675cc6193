// Timing of the bench/ binaries' kernels: the best of repeated calls.
#pragma once
#include <algorithm>
#include <chrono>
#include <functional>

// Best wall time in ms of `fn` over enough repetitions for ~`budget_s` seconds
// (at least 3, at most 200), after one warm-up call (primitive creation,
// first touch).
inline double best_ms(const std::function<void()>& fn, double budget_s = 0.5) {
  fn();
  double best = 1e30, total = 0;
  for (int rep = 0; rep < 3 || (total < budget_s && rep < 200); ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, sec);
    total += sec;
  }
  return best * 1e3;
}
