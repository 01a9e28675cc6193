#include "optim/grad_scaler.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace mt {

GradScaler GradScaler::constant(double scale) {
  MT_CHECK(scale > 0.0, "constant loss scale ", scale, " must be > 0; fix: pass --loss-scale > 0");
  GradScaler g;
  g.scale_ = g.min_scale_ = scale;
  g.hysteresis_tracker_ = 0;
  return g;
}

GradScaler GradScaler::dynamic(double initial_scale, double min_scale, double growth_factor,
                               double backoff_factor, int64_t growth_interval,
                               int64_t hysteresis) {
  // The same preconditions Megatron asserts.
  MT_CHECK(min_scale > 0.0 && min_scale <= initial_scale, "loss scale: min_scale ", min_scale,
           " must be > 0 and <= initial_scale ", initial_scale,
           "; fix: lower --min-loss-scale or raise --initial-loss-scale");
  MT_CHECK(growth_factor > 1.0, "loss scale growth factor ", growth_factor, " must be > 1");
  MT_CHECK(backoff_factor > 0.0 && backoff_factor < 1.0, "loss scale backoff factor ",
           backoff_factor, " must be in (0, 1)");
  MT_CHECK(growth_interval > 0, "--loss-scale-window ", growth_interval, " must be > 0");
  MT_CHECK(hysteresis > 0, "--hysteresis ", hysteresis, " must be > 0");
  GradScaler g;
  g.dynamic_ = true;
  g.scale_ = initial_scale;
  g.min_scale_ = min_scale;
  g.growth_factor_ = growth_factor;
  g.backoff_factor_ = backoff_factor;
  g.growth_interval_ = growth_interval;
  g.hysteresis_ = hysteresis;
  g.growth_tracker_ = 0;
  g.hysteresis_tracker_ = hysteresis;
  return g;
}

void GradScaler::update(bool found_inf) {
  if (!dynamic_) return;
  if (found_inf) {
    growth_tracker_ = 0;
    hysteresis_tracker_ -= 1;
    if (hysteresis_tracker_ <= 0) scale_ = std::max(scale_ * backoff_factor_, min_scale_);
  } else {
    growth_tracker_ += 1;
    // >= (Megatron: ==) so that a checkpoint resumed with a shorter window still grows.
    if (growth_tracker_ >= growth_interval_) {
      growth_tracker_ = 0;
      hysteresis_tracker_ = hysteresis_;
      scale_ *= growth_factor_;
    }
  }
}

nlohmann::json GradScaler::state() const {
  return nlohmann::json{{"scale", scale_},
                        {"growth_tracker", growth_tracker_},
                        {"hysteresis_tracker", hysteresis_tracker_}};
}

void GradScaler::load_state(const nlohmann::json& state) {
  if (!dynamic_) return;
  for (const char* key : {"scale", "growth_tracker", "hysteresis_tracker"})
    MT_CHECK(state.contains(key) && state[key].is_number(), "grad scaler state lacks a numeric '",
             key, "': ", state.dump(),
             "; fix: load a checkpoint saved with fp16 dynamic loss scaling");
  const double scale = state["scale"].get<double>();
  const int64_t growth = state["growth_tracker"].get<int64_t>();
  MT_CHECK(scale > 0.0 && growth >= 0, "grad scaler state has scale ", scale,
           " and growth_tracker ", growth, " (need scale > 0, tracker >= 0)",
           "; fix: the checkpoint's optimizer state is damaged, resume from an earlier one");
  scale_ = scale;
  growth_tracker_ = growth;
  hysteresis_tracker_ = state["hysteresis_tracker"].get<int64_t>();
}

}  // namespace mt
