// Logging and timing. Rank-0 printing is the caller's choice (pass `enabled`).
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

namespace mt {

// "[2026-11-22 10:00:00] " in local time.
std::string timestamp();

class Timer {
 public:
  Timer() : start_(std::chrono::steady_clock::now()) {}
  void reset() { start_ = std::chrono::steady_clock::now(); }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

// printf to stdout and flush, if enabled.
void log_line(bool enabled, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace mt
