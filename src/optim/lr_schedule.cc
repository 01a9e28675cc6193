#include "optim/lr_schedule.h"

#include <cmath>

#include "core/error.h"

namespace mt {

LrDecayStyle parse_lr_decay_style(const std::string& s) {
  if (s == "constant") return LrDecayStyle::kConstant;
  if (s == "linear") return LrDecayStyle::kLinear;
  if (s == "cosine") return LrDecayStyle::kCosine;
  if (s == "WSD") return LrDecayStyle::kWsd;
  MT_FAIL("--lr-decay-style '", s, "' is not one of constant, linear, cosine, WSD");
}

WsdDecayStyle parse_wsd_decay_style(const std::string& s) {
  if (s == "linear") return WsdDecayStyle::kLinear;
  if (s == "cosine") return WsdDecayStyle::kCosine;
  if (s == "exponential") return WsdDecayStyle::kExponential;
  if (s == "minus_sqrt") return WsdDecayStyle::kMinusSqrt;
  MT_FAIL("--lr-wsd-decay-style '", s, "' is not one of linear, cosine, exponential, minus_sqrt");
}

void LrSchedule::validate() const {
  MT_CHECK(max_lr >= 0 && min_lr >= 0 && min_lr <= max_lr, "--min-lr ", min_lr,
           " must be in [0, --lr ", max_lr, "]");
  MT_CHECK(warmup_iters >= 0, "warm-up iterations ", warmup_iters, " must be >= 0");
  if (style != LrDecayStyle::kConstant)
    MT_CHECK(decay_iters > warmup_iters || (decay_iters == 0 && warmup_iters == 0),
             "--lr-decay-iters ", decay_iters, " must exceed the warm-up iterations ",
             warmup_iters, "; fix: lower --lr-warmup-iters/--lr-warmup-fraction");
  if (style == LrDecayStyle::kWsd)
    MT_CHECK(wsd_decay_iters > 0 && wsd_decay_iters <= decay_iters, "--lr-wsd-decay-iters ",
             wsd_decay_iters, " must be in (0, --lr-decay-iters ", decay_iters, "]");
}

double LrSchedule::lr_at(double steps) const {
  if (warmup_iters > 0 && steps <= warmup_iters)
    return max_lr * steps / warmup_iters;
  if (style == LrDecayStyle::kConstant) return max_lr;
  if (steps > decay_iters) return min_lr;
  const double delta = max_lr - min_lr;
  if (style == LrDecayStyle::kWsd) {
    const double anneal_start = decay_iters - wsd_decay_iters;
    if (steps <= anneal_start) return max_lr;
    const double r = (steps - anneal_start) / wsd_decay_iters;
    double coeff = 0;
    switch (wsd_style) {
      case WsdDecayStyle::kLinear: coeff = 1.0 - r; break;
      case WsdDecayStyle::kCosine: coeff = 0.5 * (std::cos(M_PI * r) + 1.0); break;
      case WsdDecayStyle::kExponential: coeff = 2.0 * std::pow(0.5, r) - 1.0; break;
      case WsdDecayStyle::kMinusSqrt: coeff = 1.0 - std::sqrt(r); break;
    }
    return min_lr + coeff * delta;
  }
  const double r = (steps - warmup_iters) / (decay_iters - warmup_iters);
  const double coeff = style == LrDecayStyle::kLinear ? 1.0 - r : 0.5 * (std::cos(M_PI * r) + 1.0);
  return min_lr + coeff * delta;
}

}  // namespace mt
