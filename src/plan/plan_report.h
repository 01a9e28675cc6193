// `megatron plan`: every layout the flags leave free, with its memory per rank
// (first and last pipeline stage, train's memory model), whether it fits the
// device, its step time (plan_time.h), tokens/s, TFLOP/s and MFU per device;
// ranked by tokens/s, with why the best beat the rest; as a table or JSON lines.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "plan/plan_layout.h"
#include "plan/plan_time.h"

namespace mt {

struct PlanResult {
  PlanLayout layout;
  PlanMemory memory;
  NodeCrossing crossing;
  StepTime time;
  int64_t num_micro_batches = 1;
  bool fits = false;
  double tokens_per_s = 0, tflops_per_device = 0, mfu = 0;
  double most_loaded_bytes() const { return memory.most_loaded().total(); }
};

// Evaluates every layout (fits or not), sorted: the ones that fit first, by
// tokens/s; then the others, by how little they overflow.
std::vector<PlanResult> evaluate_layouts(const PlanProblem& pb, const std::vector<PlanLayout>& ls,
                                         const PlanCluster& c);

// The JSON object of one result: tp, pp, vp, dp, cp, micro_batch_size,
// num_micro_batches, sequence_parallel, recompute, distributed_optimizer,
// precision, memory {weight_and_optimizer_bytes, activation_bytes,
// total_bytes} of the most loaded rank, step_time_s, tokens_per_s,
// tflops_per_device, mfu, fits.
nlohmann::json plan_result_json(const PlanResult& r);

// The table of the first `top` results (0: all), memory by class of the
// first and last stage for the best, its groups on nodes, and why the top
// ones beat the rest.
std::string format_plan(const PlanProblem& pb, const PlanCluster& c,
                        const std::vector<PlanResult>& results, int64_t top);

// One line: why `r` (not fitting) does not fit: the stage, its bytes, the
// device's, the overflow, the biggest class.
std::string misfit_reason(const PlanResult& r, const PlanCluster& c);

// Why `a` is faster than `b`: the step-time parts where b loses most.
std::string why_faster(const PlanResult& a, const PlanResult& b);

}  // namespace mt
