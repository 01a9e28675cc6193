#include "train/rerun_check.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/error.h"
#include "core/log.h"

namespace mt {

namespace {

// Python's f"{x:.3E}" and str() of a float result.
std::string sci(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3E", x);
  return buf;
}
std::string value(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6E", x);
  return buf;
}
// Python's f"{n:,}".
std::string grouped(int64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string host_name() {
  char h[256] = {};
  return gethostname(h, sizeof h - 1) == 0 ? std::string(h) : std::string("?");
}

}  // namespace

double compare_results(double a, double b) {
  if (a == b || (std::isnan(a) && std::isnan(b))) return 0.0;
  if (std::isnan(a) != std::isnan(b) || std::isinf(a) != std::isinf(b))
    return std::numeric_limits<double>::infinity();
  return std::fabs((a - b) / (a + b) * 2);
}

void DeterminismStats::record(double diff) {
  if (diff == 0.0) {
    ++zero_;
    return;
  }
  samples_.push_back(diff);
  max_ = std::max(max_, diff);
}

std::string DeterminismStats::print() const {
  const int64_t n = int64_t(samples_.size()), z = zero_;
  if (n == 0) return grouped(z) + " samples, all identical";
  std::vector<double> s = samples_;
  std::sort(s.begin(), s.end());
  const int64_t t = z + n;
  double sum = 0;
  for (double x : s) sum += x;
  std::string out = grouped(t) + "/" + grouped(z) +
                    " total/identical samples, rel. variability: avg= " + sci(sum / double(t));
  const std::pair<double, const char*> ps[] = {
      {0.5, "p50"}, {0.9, "p90"}, {0.99, "p99"}, {0.999, "p99.9"}};
  for (const auto& [p, name] : ps) {
    const int64_t i = int64_t(double(t) * p) - z;
    out += std::string(", ") + name + "= " + (i >= 0 ? sci(s[size_t(i)]) : "0.0");
  }
  return out + ", max: " + sci(max_);
}

RerunCheck::RerunCheck(const RunCheckArgs& c, const ParallelState& ps)
    : mode_(c.rerun_mode), ps_(ps) {
  if (c.check_for_nan_in_loss_and_grad) {
    calls_.push_back({"found NaN in local forward loss calculation", true, Check::kNan});
    calls_.push_back({"found Inf in local forward loss calculation", true, Check::kInf});
  }
  if (c.check_for_spiky_loss) calls_.push_back({"Spiky loss", false, Check::kSpike});
}

bool RerunCheck::rejects(const Call& c, double loss) {
  switch (c.check) {
    case Check::kNan:
      return std::isnan(loss);
    case Check::kInf:
      return std::isinf(loss);
    case Check::kSpike:
      return spiky_.is_spike(loss);
  }
  return false;
}

std::string RerunCheck::where(int64_t iteration) const {
  return "Rank " + std::to_string(ps_.world_rank) + ", node " + host_name() +
         ", device cpu, iteration #" + std::to_string(iteration);
}

void RerunCheck::after_forward_backward(int64_t iteration, double loss,
                                        const std::function<double()>& rerun) {
  if (mode_ == "validate_results") validate(iteration, loss, rerun);
  if (mode_ == "report_stats") report_stats(iteration, loss, rerun);
}

void RerunCheck::validate(int64_t iteration, double loss, const std::function<double()>& rerun) {
  const bool rank0 = ps_.world_rank == 0;
  // As Megatron: not on the first iteration a process runs.
  if (!first_iteration_done_) {
    first_iteration_done_ = true;
    log_line(rank0, "warning: Result validation enabled\n");
    return;
  }
  const Call* failed = nullptr;
  for (const Call& c : calls_)
    if (rejects(c, loss)) {
      failed = &c;
      break;
    }
  if (failed == nullptr) return;
  const char* level = failed->fatal ? "error" : "warning";
  log_line(rank0,
           "error: Unexpected result %s on rank %d at iteration #%lld invocation #1 "
           "(message='%s')\n",
           value(loss).c_str(), ps_.world_rank, static_cast<long long>(iteration), failed->message);
  log_line(rank0, "warning: Need to rerun step to check reproducibility of initial result\n");
  const double again = rerun();
  const std::string at = where(iteration);
  const std::string continuing =
      "warning: Continuing normal execution because failed validation was not fatal\n";
  if (compare_results(loss, again) > 0.0) {  // tolerance 0
    log_line(rank0,
             "%s: %s: First rerun: unexpected result is not reproducible within the "
             "tolerance (%s != %s)!\n",
             level, at.c_str(), value(again).c_str(), value(loss).c_str());
    log_line(rank0, "%s: %s: Possible transient error!\n", level, at.c_str());
    if (!failed->fatal) return log_line(rank0, "%s", continuing.c_str());
    throw RerunExit{kExitFailedOnResultValidation, false,
                    "Exiting now. The job can be resumed from a previous checkpoint"};
  }
  log_line(rank0,
           "%s: %s: First rerun: unexpected result is reproducible within the tolerance "
           "(%s = %s). Need to rerun on a different GPU to verify correctness.!\n",
           level, at.c_str(), value(again).c_str(), value(loss).c_str());
  if (!failed->fatal) return log_line(rank0, "%s", continuing.c_str());
  // Megatron's re-run on another device, concluded here (see the header).
  log_line(rank0,
           "warning: Second rerun: unexpected result is reproducible on a different GPU, "
           "therefore it was likely correct (%s = %s) (CPU: no device has kernels of its own, "
           "so the re-run above is what another device computes)\n",
           value(again).c_str(), value(loss).c_str());
  log_line(rank0, "error: %s: Correct result (but possible Application error) (%s)!\n", at.c_str(),
           failed->message);
  throw RerunExit{kExitFailedOnResultValidation, true,
                  "Exiting now. A checkpoint at the last iteration already exists if further "
                  "examination is needed"};
}

void RerunCheck::report_stats(int64_t iteration, double loss,
                              const std::function<double()>& rerun) {
  const double again = rerun();
  if (ps_.world_rank != 0) return;  // every rank holds the same global loss
  for (const Call& c : calls_) stats_[c.message].record(compare_results(loss, again));
  if (iteration % 2 != 0) return;  // Megatron's REPORTING_INTERVAL_ITERATIONS
  std::string out = "Stats on computation determinism in validation calls\n";
  for (const Call& c : calls_)
    out += std::string("  From validation call '") + c.message + "':\n    " +
           stats_[c.message].print() + "\n";
  log_line(true, "%s", out.c_str());
}

}  // namespace mt
