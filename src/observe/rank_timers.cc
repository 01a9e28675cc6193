#include "observe/rank_timers.h"

#include <algorithm>
#include <cstdio>

namespace mt {

namespace {

constexpr int kTimers = 4;
const char* const kNames[kTimers] = {"iteration-time", "forward-backward", "all-grads-sync",
                                     "optimizer"};

// Megatron's name column: the name and a space, padded with dots to 48.
std::string dotted(const char* name) {
  std::string s = std::string(name) + " ";
  if (s.size() < 48) s.append(48 - s.size(), '.');
  return s;
}

}  // namespace

void RankTimers::add(const StepResult& r, double step_seconds) {
  sums_[0] += step_seconds;
  sums_[1] += r.forward_backward_seconds;
  sums_[2] += r.grads_sync_seconds;
  sums_[3] += r.optimizer_seconds;
  ++iters_;
}

std::string RankTimers::report(const ParallelState& ps, nlohmann::json& j) {
  if (!active() || iters_ == 0) return "";
  const size_t world = size_t(ps.world_size);
  std::vector<double> ms(world * kTimers, 0.0);  // [rank][timer], ms per iteration
  for (int k = 0; k < kTimers; ++k)
    ms[size_t(ps.world_rank) * kTimers + size_t(k)] = 1e3 * sums_[k] / iters_;
  ps.world_comm.all_reduce_sum(ms.data(), int64_t(ms.size()));
  iters_ = 0;
  std::fill(sums_, sums_ + kTimers, 0.0);
  auto at = [&](size_t rank, int k) { return ms[rank * kTimers + size_t(k)]; };
  std::string text;
  char buf[160];
  if (level_ >= 1) {
    text += option_ == "all" ? "times across ranks (ms):"
            : option_ == "max" ? "max time across ranks (ms):"
                               : "(min, max) time across ranks (ms):";
    nlohmann::json timers = nlohmann::json::object();
    for (int k = 1; k < kTimers; ++k) {
      double lo = at(0, k), hi = at(0, k);
      for (size_t r = 1; r < world; ++r) {
        lo = std::min(lo, at(r, k));
        hi = std::max(hi, at(r, k));
      }
      timers[kNames[k]] = {lo, hi};
      if (option_ == "all") {
        text += std::string("\n  ") + kNames[k] + ":";
        for (size_t r = 0; r < world; ++r) {
          std::snprintf(buf, sizeof buf, "\n     rank %2zu: %.2f", r, at(r, k));
          text += buf;
        }
      } else if (option_ == "max") {
        std::snprintf(buf, sizeof buf, "\n    %s: %.2f", dotted(kNames[k]).c_str(), hi);
        text += buf;
      } else {
        std::snprintf(buf, sizeof buf, "\n    %s: (%.2f, %.2f)", dotted(kNames[k]).c_str(), lo, hi);
        text += buf;
      }
    }
    j["timers_ms"] = timers;
  }
  if (straggler_) {
    size_t slow = 0, fast = 0;
    for (size_t r = 1; r < world; ++r) {
      if (at(r, 0) > at(slow, 0)) slow = r;
      if (at(r, 0) < at(fast, 0)) fast = r;
    }
    const double spread = at(fast, 0) > 0 ? (at(slow, 0) - at(fast, 0)) / at(fast, 0) : 0.0;
    std::snprintf(buf, sizeof buf,
                  "%sstraggler: MnRtt/Rnk: %.1fms/%zu | MxRtt/Rnk: %.1fms/%zu | spread: %.1f%%",
                  text.empty() ? "" : "\n", at(fast, 0), fast, at(slow, 0), slow, 100 * spread);
    text += buf;
    j["straggler_slowest_rank"] = slow;
    j["straggler_slowest_ms"] = at(slow, 0);
    j["straggler_fastest_rank"] = fast;
    j["straggler_fastest_ms"] = at(fast, 0);
    j["straggler_spread"] = spread;
  }
  return text;
}

}  // namespace mt
