// Learning-rate schedule as Megatron-LM's OptimizerParamScheduler: linear
// warm-up from 0, then constant / linear / cosine / WSD decay to min-lr at
// lr-decay-iters, min-lr after. Iteration k (1-based) trains with lr_at(k - 1).
// Megatron counts the schedule in samples (each iteration advances it by the
// global batch); with a constant global batch that is the iteration count
// times the batch, so here lengths are in iterations, fractional where
// sample-based flags do not divide by the batch (--lr-warmup-samples 12 at
// global batch 8: 1.5 iterations), or a --lr-warmup-fraction of the decay.
#pragma once
#include <cstdint>
#include <string>

namespace mt {

enum class LrDecayStyle { kConstant, kLinear, kCosine, kWsd };
enum class WsdDecayStyle { kLinear, kCosine, kExponential, kMinusSqrt };

LrDecayStyle parse_lr_decay_style(const std::string& s);
WsdDecayStyle parse_wsd_decay_style(const std::string& s);

struct LrSchedule {
  double max_lr = 1e-3, min_lr = 0.0;
  double warmup_iters = 0;
  double decay_iters = 0;       // Megatron: defaults to train-iters
  LrDecayStyle style = LrDecayStyle::kLinear;
  double wsd_decay_iters = 0;   // WSD: length of the final decay phase
  WsdDecayStyle wsd_style = WsdDecayStyle::kExponential;

  // Learning rate after `steps` completed iterations.
  double lr_at(double steps) const;
  void validate() const;
};

}  // namespace mt
