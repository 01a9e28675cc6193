#include "plan/plan_layout.h"

#include <algorithm>
#include <map>

#include "core/checked_math.h"
#include "core/error.h"
#include "model/params.h"
#include "optim/staged_grads.h"
#include "pipeline/schedules.h"

namespace mt {

int64_t plan_world_size(int64_t nodes, int64_t devices_per_node) {
  MT_CHECK(nodes > 0 && devices_per_node > 0, "--num-nodes ", nodes, " and --devices-per-node ",
           devices_per_node, " must be > 0");
  const int64_t world = checked_mul(nodes, devices_per_node, "--num-nodes x --devices-per-node");
  MT_CHECK(world <= kMaxPlanRanks, "--num-nodes ", nodes, " x --devices-per-node ",
           devices_per_node, " = ", world, " ranks is more than plan's limit of ", kMaxPlanRanks,
           " (2^20) ranks; fix: plan a cluster of at most ", kMaxPlanRanks, " ranks");
  return world;
}

std::string PlanLayout::name() const {
  std::string s = "TP" + std::to_string(tp) + (cp > 1 ? " CP" + std::to_string(cp) : "") + " PP" +
                  std::to_string(pp);
  if (vp > 1) s += " VP" + std::to_string(vp);
  s += " DP" + std::to_string(dp);
  if (ep > 1) s += " EP" + std::to_string(ep);
  s += " mbs" + std::to_string(micro_batch_size);
  if (sequence_parallel) s += " SP";
  s += recompute == "full" ? " full-recompute" : "";
  if (distributed_optimizer)
    s += sharding == "optim_grads"          ? " ZeRO-2"
         : sharding == "optim_grads_params" ? " ZeRO-3"
                                            : " ZeRO-1";
  s += bf16 ? " bf16" : " fp32";
  return s;
}

TrainArgs train_args_of(const PlanProblem& pb, const PlanLayout& l) {
  TrainArgs a;
  a.model = pb.model;
  a.tensor_model_parallel_size = int(l.tp);
  a.pipeline_model_parallel_size = int(l.pp);
  a.context_parallel_size = int(l.cp);
  a.expert_model_parallel_size = int(l.ep);
  a.num_layers_per_virtual_pipeline_stage =
      l.vp > 1 ? pb.model.num_layers / (l.pp * l.vp) : 0;
  a.sequence_parallel = l.sequence_parallel;
  if (l.recompute == "full") {
    a.recompute_granularity = "full";
    a.recompute_method = "uniform";
    a.recompute_num_layers = 1;
  } else {
    a.recompute_granularity = "selective";
    a.recompute_modules = pb.recompute_modules;
    a.moe_layer_recompute = pb.moe_layer_recompute;
  }
  a.use_distributed_optimizer = l.distributed_optimizer && l.sharding.empty();
  if (!l.sharding.empty()) {
    a.use_megatron_fsdp = true;
    a.data_parallel_sharding_strategy = l.sharding;
  }
  a.bf16 = l.bf16;
  a.micro_batch_size = l.micro_batch_size;
  a.global_batch_size = pb.global_batch_size;
  a.train_iters = 1;
  a.data_path = {"(megatron plan)"};
  a.tokenizer_type = "NullTokenizer";
  a.vocab_size = std::max<int64_t>(pb.model.vocab_size, 1);
  return a;
}

void check_layout(const PlanProblem& pb, const PlanLayout& l) {
  MT_CHECK(l.recompute == "selective" || l.recompute == "full", "--recompute-granularity '",
           l.recompute, "' is not one of selective, full");
  TrainArgs a = train_args_of(pb, l);
  a.validate(int(pb.world));  // train's checks and messages, world = nodes x devices per node
  MT_CHECK(l.world() == pb.world, "TP ", l.tp, " x CP ", l.cp, " x PP ", l.pp, " x DP ", l.dp,
           " = ", l.world(),
           " ranks, but the cluster has ", pb.world, " (internal error)");
  MT_CHECK(a.virtual_stages() == l.vp, "--num-layers ", pb.model.num_layers,
           " is not divisible by PP ", l.pp, " x ", l.vp, " virtual stages");
  ModelConfig m = pb.model;
  m.finalize(l.tp);  // padded vocabulary per TP, parameter count
  MT_CHECK(m.padded_vocab_size % l.tp == 0, "padded vocabulary ", m.padded_vocab_size,
           " is not divisible by TP ", l.tp);
}

namespace {

// Ascending; O(sqrt(n)).
std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t i = 1; i <= n / i; ++i)
    if (n % i == 0) {
      low.push_back(i);
      if (i != n / i) high.push_back(n / i);
    }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

template <class T>
std::vector<T> pinned_or(const std::optional<T>& pin, std::vector<T> free) {
  return pin ? std::vector<T>{*pin} : free;
}

// The optimizer / data-parallel sharding options to try: "none", "zero1"
// (--use-distributed-optimizer) and Megatron-FSDP's "optim_grads",
// "optim_grads_params" ("optim" is the distributed optimizer: "zero1").
std::vector<std::string> sharding_options(const PlanPins& pins, bool data_parallel) {
  if (pins.sharding) {
    if (*pins.sharding == "no_shard") return {"none"};
    return {*pins.sharding == "optim" ? "zero1" : *pins.sharding};
  }
  if (!data_parallel || pins.distributed_optimizer == false) return {"none"};
  if (pins.distributed_optimizer == true) return {"zero1"};
  return {"none", "zero1", "optim_grads", "optim_grads_params"};
}

// The message of an mt::Error without its "file.cc:123: " prefix.
std::string reason(const Error& e) {
  const std::string w = e.what();
  const size_t colon = w.find(": ");
  return colon == std::string::npos ? w : w.substr(colon + 2);
}

}  // namespace

std::vector<PlanLayout> enumerate_layouts(const PlanProblem& pb, const PlanPins& pins,
                                          std::vector<std::string>* rejected) {
  std::vector<PlanLayout> out;
  std::map<std::string, std::string> reasons;  // reason -> the first layout it rejected
  const int64_t L = pb.model.num_layers;
  const int64_t cp = pins.cp.value_or(1);
  for (int64_t tp : pinned_or(pins.tp, divisors(pb.world)))
    for (int64_t pp : pinned_or(pins.pp, divisors(std::max<int64_t>(pb.world / (tp * cp), 1)))) {
      std::vector<int64_t> vps = {1};
      if (pins.layers_per_virtual_stage) {
        const int64_t k = *pins.layers_per_virtual_stage;
        vps = {k > 0 && k <= L / pp && L % (pp * k) == 0 ? L / (pp * k) : 0};  // no overflow
      } else if (pp > 1) {
        for (int64_t v = 2; v <= L / pp; ++v)
          if (L % (pp * v) == 0) vps.push_back(v);
      }
      const int64_t dp = pb.world / std::max<int64_t>(tp * cp * pp, 1);
      const int64_t per_dp = pb.global_batch_size / std::max<int64_t>(dp, 1);
      std::vector<int64_t> mbs;
      for (int64_t b : {1, 2, 4, 8, 16})
        if (per_dp > 0 && per_dp % b == 0) mbs.push_back(b);
      if (mbs.empty()) mbs.push_back(1);  // check_layout names the batch misfit
      std::vector<int64_t> eps = {1};
      if (pb.model.moe() && !pins.ep) {
        eps.clear();
        for (int64_t e : divisors(std::max<int64_t>(tp * cp * dp, 1)))
          if (pb.model.num_experts % e == 0) eps.push_back(e);
      }
      for (int64_t ep : pinned_or(pins.ep, eps))
      for (int64_t v : vps)
        for (int64_t b : pinned_or(pins.micro_batch_size, mbs)) {
          // The first combination below is the least constrained (no SP,
          // selective, no ZeRO: train's checks of those only add conditions,
          // and precision adds none); when it fails, so do the others, so
          // they are not tried (a world of many divisors has ~10^6
          // candidates, each rejection an exception).
          bool first = true, first_failed = false;
          // TP 1 runs without SP even when it is pinned (train switches it
          // off with a warning, as Megatron-LM does; plan_cmd says so).
          for (bool sp : tp > 1 ? pinned_or(pins.sequence_parallel, std::vector<bool>{false, true})
                                : std::vector<bool>{false})
            for (const std::string& rc :
                 pinned_or(pins.recompute, std::vector<std::string>{"selective", "full"}))
              for (const std::string& zero : sharding_options(pins, dp * cp > 1))
                for (bool bf16 : pinned_or(pins.bf16, std::vector<bool>{true, false})) {
                  if (first_failed) continue;
                  PlanLayout l;
                  l.tp = tp, l.pp = pp, l.vp = std::max<int64_t>(v, 1), l.dp = dp, l.cp = cp;
                  l.ep = ep;
                  l.micro_batch_size = b, l.sequence_parallel = sp, l.recompute = rc;
                  l.distributed_optimizer = zero != "none";
                  l.sharding = zero == "none" || zero == "zero1" ? "" : zero;
                  l.bf16 = bf16;
                  try {
                    MT_CHECK(v > 0, "--num-layers ", L, " is not divisible by PP ", pp,
                             " x --num-layers-per-virtual-pipeline-stage ",
                             pins.layers_per_virtual_stage.value_or(0));
                    MT_CHECK(tp * cp * pp <= pb.world, "TP ", tp, " x CP ", cp, " x PP ", pp,
                             " = ", tp * cp * pp, " is more than the ", pb.world,
                             " ranks of the cluster");
                    check_layout(pb, l);
                    out.push_back(l);
                  } catch (const Error& e) {
                    reasons.emplace(reason(e), l.name());
                    first_failed = first;
                  }
                  first = false;
                }
        }
    }
  if (rejected) {
    rejected->clear();
    for (const auto& [why, first] : reasons) rejected->push_back(why + " (e.g. " + first + ")");
  }
  return out;
}

ParamRegistry stage_registry(const PlanProblem& pb, const PlanLayout& l, int64_t pp_rank) {
  const TrainArgs a = train_args_of(pb, l);
  ModelConfig m = pb.model;
  m.finalize(l.tp);
  TrainArgs am = a;
  am.model = m;
  return ParamRegistry(m, am.stage_layout(0, int(l.tp), int(pp_rank), int(l.pp)));
}

MemoryPlan layout_memory_plan(const PlanProblem& pb, const PlanLayout& l, int64_t pp_rank) {
  return layout_memory_plan(pb, l, pp_rank, stage_registry(pb, l, pp_rank));
}

MemoryPlan layout_memory_plan(const PlanProblem& pb, const PlanLayout& l, int64_t pp_rank,
                              const ParamRegistry& reg) {
  const TrainArgs a = train_args_of(pb, l);
  const int64_t m = pb.global_batch_size / (l.micro_batch_size * l.dp);
  // As trainer.cc's setup_model_and_optimizer plans them.
  const int64_t in_flight = l.vp > 1 ? max_in_flight_interleaved(int(l.pp), int(pp_rank), int(l.vp), m)
                                     : max_in_flight_1f1b(int(l.pp), int(pp_rank), m);
  // ZeRO shards over DP x CP, and each CP rank holds s/CP of every sequence.
  MemoryPlan p = memory_plan(reg, l.micro_batch_size, l.tp, l.sequence_parallel, in_flight,
                             a.recompute(), a.math_mode(), l.dp * l.cp, l.distributed_optimizer);
  p.cp = l.cp;
  p.async_save = pb.async_save;
  if (!l.sharding.empty()) {  // Megatron-FSDP: the staging pools (optim/staged_grads.h)
    const GradPlacement g = plan_staged_grads(reg);
    p.grads_staged = g.floats;
    if (l.sharding == "optim_grads_params") p.params_staged = g.weight_floats;
  }
  return p;
}

PlanMemory layout_memory(const PlanProblem& pb, const PlanLayout& l) {
  PlanMemory pm;
  pm.first = predict_memory(layout_memory_plan(pb, l, 0));
  pm.last = l.pp == 1 ? pm.first : predict_memory(layout_memory_plan(pb, l, l.pp - 1));
  return pm;
}

int64_t layout_params_local(const PlanProblem& pb, const PlanLayout& l, int64_t pp_rank) {
  return stage_registry(pb, l, pp_rank).total_floats();
}

}  // namespace mt
