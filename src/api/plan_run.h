// What megatron::plan() and megatron::Planner (include/megatron/plan.h) share:
// the public model, cluster and options checked as `megatron plan` checks its
// flags, the layouts enumerated and evaluated (plan/plan_report.h).
#pragma once
#include <functional>
#include <vector>

#include "megatron/plan.h"
#include "model/config.h"
#include "plan/plan_report.h"

namespace mt {

struct PlanRun {
  PlanProblem pb;
  PlanPins pins;
  PlanCluster c;
  std::vector<PlanResult> results;  // evaluate_layouts' order: fitting ones first, fastest first
};

// Throws mt::Error naming the flag (the ones the options stand for) and the
// fix, or when no layout can run the model. `flag_checks`: the Planner's own
// checks of its flags, run where `megatron plan` ran them (before the
// device profile is read); `on_layouts`: told the layouts that can run,
// before they are evaluated (and before none is refused).
PlanRun run_plan_layouts(
    const ModelConfig& model, const megatron::Cluster& cluster,
    const megatron::PlanOptions& options, const std::function<void()>& flag_checks = {},
    const std::function<void(const std::vector<PlanLayout>&)>& on_layouts = {});

megatron::Layout public_layout(const PlanLayout& l);
PlanLayout private_layout(const megatron::Layout& l);
megatron::LayoutPlan public_layout_plan(const PlanResult& r, const PlanCluster& c);

}  // namespace mt
