// Per-rank step timers over a log interval, for Megatron's
// --timing-log-level 1|2 with --timing-log-option max|minmax|all (its
// timers.log: forward-backward, all-grads-sync and optimizer per iteration,
// in ms, across ranks) and --log-straggler (the slowest and fastest rank's
// iteration time and their spread; Megatron's StragglerDetector reports the
// min/max "Rtt" with its rank).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "args/run_check_args.h"
#include "comm/parallel_state.h"
#include "observe/step_result.h"

namespace mt {

class RankTimers {
 public:
  RankTimers() = default;
  explicit RankTimers(const RunCheckArgs& c)
      : level_(c.timing_log_level), option_(c.timing_log_option), straggler_(c.log_straggler) {}
  bool active() const { return level_ >= 1 || straggler_; }
  void add(const StepResult& r, double step_seconds);
  // At a log line: collective over the world when active (every rank calls
  // it). Returns the text for rank 0 to print ("" when inactive) and adds the
  // numbers to j (timers_ms: {name: [min, max]}; straggler_*). Resets the sums.
  std::string report(const ParallelState& ps, nlohmann::json& j);

 private:
  int level_ = 0;
  std::string option_ = "minmax";
  bool straggler_ = false;
  int iters_ = 0;
  double sums_[4] = {0, 0, 0, 0};  // iteration, forward-backward, all-grads-sync, optimizer (s)
};

}  // namespace mt
