#include "train/spiky_loss.h"

#include <algorithm>
#include <cmath>

namespace mt {

namespace {
constexpr int64_t kSamples = 100;   // Megatron's num_samples
constexpr double kFactor = 10.0;    // Megatron's SPIKY_LOSS_FACTOR
}  // namespace

bool SpikyLossCheck::is_spike(double loss) {
  const double v = std::fabs(loss);
  if (!std::isfinite(v)) return false;
  if (count_ < kSamples) {
    ++count_;
    max_ = std::max(max_, v);
    return false;
  }
  return v >= max_ * kFactor;
}

}  // namespace mt
