// Megatron's --check-for-spiky-loss (rerun_state_machine.is_unexpectedly_large
// with SPIKY_LOSS_FACTOR 10, context "loss"): the first 100 losses set the
// largest magnitude seen; after them a loss >= 10x that is flagged (NaN and
// Inf are the NaN check's). With --rerun-mode disabled Megatron only warns
// (the trainer's step checks); with validate_results the spike is re-run and
// training goes on (train/rerun_check.h). Megatron checks each rank's local
// micro-batch loss; here the iteration's global mean loss, which every rank
// holds, is checked.
#pragma once
#include <cstdint>

namespace mt {

class SpikyLossCheck {
 public:
  // True: `loss` is a spike (warn).
  bool is_spike(double loss);
  double max_seen() const { return max_; }

 private:
  int64_t count_ = 0;
  double max_ = 0;
};

}  // namespace mt
