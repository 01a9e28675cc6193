#include "optim/wd_schedule.h"

#include <cmath>

#include "core/error.h"

namespace mt {

WdIncrStyle parse_wd_incr_style(const std::string& s) {
  if (s == "constant") return WdIncrStyle::kConstant;
  if (s == "linear") return WdIncrStyle::kLinear;
  if (s == "cosine") return WdIncrStyle::kCosine;
  MT_FAIL("--weight-decay-incr-style '", s, "' is not one of constant, linear, cosine");
}

const char* wd_incr_style_name(WdIncrStyle s) {
  switch (s) {
    case WdIncrStyle::kConstant: return "constant";
    case WdIncrStyle::kLinear: return "linear";
    case WdIncrStyle::kCosine: return "cosine";
  }
  return "?";
}

void WdSchedule::validate() const {
  MT_CHECK(std::isfinite(start_wd) && start_wd >= 0, "--start-weight-decay ", start_wd,
           " must be a finite number >= 0");
  MT_CHECK(std::isfinite(end_wd) && end_wd >= start_wd, "--end-weight-decay ", end_wd,
           " must be >= --start-weight-decay ", start_wd,
           " (Megatron-LM's weight decay only increases); fix: swap them, or use "
           "--weight-decay-incr-style constant with --weight-decay");
  MT_CHECK(style != WdIncrStyle::kConstant || start_wd == end_wd,
           "a constant weight decay needs --start-weight-decay ", start_wd,
           " == --end-weight-decay ", end_wd, " (internal error)");
}

double WdSchedule::wd_at(double steps) const {
  if (steps > incr_iters || incr_iters <= 0) return end_wd;
  if (style == WdIncrStyle::kConstant) return end_wd;
  const double ratio = steps / incr_iters;
  const double coeff =
      style == WdIncrStyle::kLinear ? ratio : 0.5 * (std::cos(M_PI * (1 - ratio)) + 1.0);
  return start_wd + coeff * (end_wd - start_wd);
}

}  // namespace mt
