// Loss scaling for fp16 training, with Megatron-LM's semantics
// (megatron/core/optimizer/grad_scaler.py: ConstantGradScaler,
// DynamicGradScaler). The loss is multiplied by scale() before backward; the
// optimizer then unscales the gradients (kernels/reduce.h: unscale_and_check), skips the step
// when any gradient overflowed, and calls update(found_inf).
//
// Dynamic rule (as Megatron's DynamicGradScaler.update):
//   overflow:   growth_tracker = 0; hysteresis_tracker -= 1;
//               if hysteresis_tracker <= 0: scale = max(scale·backoff, min_scale)
//   clean step: growth_tracker += 1; when it reaches growth_interval:
//               growth_tracker = 0, hysteresis_tracker = hysteresis, scale *= growth
// So with hysteresis 2 the first overflow after a growth (or the start) does
// not back off, and every further one does until the next growth; a clean step
// alone does not restore the hysteresis budget.
// Differences from Megatron: the scale is kept in double (Megatron: a float32
// tensor; identical for power-of-two factors, and ours never overflows to
// inf); inv_scale() is the double reciprocal (Megatron rounds it to float);
// growth fires at growth_tracker >= interval (Megatron: ==, which never fires
// again if a checkpoint is resumed with a shorter window).
#pragma once
#include <cstdint>

#include <nlohmann/json_fwd.hpp>

namespace mt {

class GradScaler {
 public:
  // Loss scale that never changes (Megatron's --loss-scale S).
  static GradScaler constant(double scale);
  // Megatron's --initial-loss-scale, --min-loss-scale, --loss-scale-window
  // (growth_interval) and --hysteresis; growth 2 and backoff 0.5 as Megatron.
  static GradScaler dynamic(double initial_scale, double min_scale, double growth_factor = 2.0,
                            double backoff_factor = 0.5, int64_t growth_interval = 1000,
                            int64_t hysteresis = 2);

  double scale() const { return scale_; }
  double inv_scale() const { return 1.0 / scale_; }
  bool is_dynamic() const { return dynamic_; }
  int64_t growth_tracker() const { return growth_tracker_; }
  int64_t hysteresis_tracker() const { return hysteresis_tracker_; }

  // After each step: found_inf = some gradient (on any rank) was inf or NaN.
  // Constant scaler: does nothing.
  void update(bool found_inf);

  // {"scale", "growth_tracker", "hysteresis_tracker"} for checkpoints.
  nlohmann::json state() const;
  // Restores a dynamic scaler; a constant one ignores the state (its scale
  // comes from the command line, as Megatron's ConstantGradScaler).
  void load_state(const nlohmann::json& state);

 private:
  GradScaler() = default;
  bool dynamic_ = false;
  double scale_ = 1.0, min_scale_ = 1.0;
  double growth_factor_ = 2.0, backoff_factor_ = 0.5;
  int64_t growth_interval_ = 1000, hysteresis_ = 2;
  int64_t growth_tracker_ = 0, hysteresis_tracker_ = 2;
};

}  // namespace mt
