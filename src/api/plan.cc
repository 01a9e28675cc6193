// megatron::plan() (include/megatron/plan.h): the public model, cluster and
// options checked as `megatron plan` checks its flags, every layout they
// leave free enumerated (plan/plan_layout.h) and evaluated
// (plan/plan_report.h). megatron::Planner (api/planner.cc) runs the same.
#include "api/plan_run.h"

#include <cmath>

#include "api/model_config.h"
#include "core/error.h"

namespace mt {

PlanRun run_plan_layouts(const ModelConfig& model, const megatron::Cluster& cluster,
                         const megatron::PlanOptions& o, const std::function<void()>& flag_checks,
                         const std::function<void(const std::vector<PlanLayout>&)>& on_layouts) {
  MT_CHECK(!cluster.device.empty(),
           "--device is required (a100-80gb, h100-80gb, cpu-here or FILE.json)");
  MT_CHECK(o.global_batch_size > 0, "--global-batch-size ", o.global_batch_size,
           " must be > 0 (it is required: plan sizes the micro-batches from it)");
  const int64_t world = plan_world_size(cluster.nodes, cluster.devices_per_node);  // <= kMaxPlanRanks
  // A pin above the limit is above the cluster too; refused here, so that
  // TP x CP x PP cannot overflow in the enumeration.
  for (const auto& [flag, pin] : {std::pair{"--tensor-model-parallel-size", o.tp},
                                  {"--pipeline-model-parallel-size", o.pp},
                                  {"--context-parallel-size", o.cp},
                                  {"--expert-model-parallel-size", o.ep}})
    MT_CHECK(pin <= kMaxPlanRanks, flag, " ", pin, " is more than the cluster's ", world,
             " ranks (and plan's limit of ", kMaxPlanRanks, "); fix: pin at most ", world);
  MT_CHECK(model.vocab_size > 0, "--vocab-size ", model.vocab_size,
           " must be > 0 (the true vocabulary; plan pads it by Megatron's rule)");
  MT_CHECK(o.cp >= 0, "--context-parallel-size ", o.cp, " must be >= 1");
  if (flag_checks) flag_checks();
  PlanRun run;
  PlanCluster& c = run.c;
  c.nodes = cluster.nodes;
  c.devices_per_node = cluster.devices_per_node;
  c.device = load_device_profile(cluster.device);
  MT_CHECK(cluster.device_memory_gb >= 0 && std::isfinite(cluster.device_memory_gb),
           "--device-memory-gb ", cluster.device_memory_gb,
           " must be > 0 (GB one rank may hold); fix: a positive number, "
           "or leave it out (or 0) for the profile's memory_bytes");
  if (cluster.device_memory_gb > 0) c.device.memory_bytes = cluster.device_memory_gb * 1e9;
  PlanProblem& pb = run.pb;
  pb.model = model;
  pb.model.check_flag_ranges();
  pb.global_batch_size = o.global_batch_size;
  pb.world = world;
  pb.async_save = o.async_save;
  pb.recompute_modules = o.recompute_modules;
  pb.moe_layer_recompute = o.moe_layer_recompute;
  PlanPins& pins = run.pins;
  if (o.tp > 0) pins.tp = o.tp;
  if (o.pp > 0) pins.pp = o.pp;
  if (o.cp > 0) pins.cp = o.cp;
  if (o.ep > 0) pins.ep = o.ep;
  if (o.layers_per_virtual_stage > 0) pins.layers_per_virtual_stage = o.layers_per_virtual_stage;
  if (o.micro_batch_size > 0) pins.micro_batch_size = o.micro_batch_size;
  pins.sequence_parallel = o.sequence_parallel;
  pins.distributed_optimizer = o.distributed_optimizer;
  if (!o.sharding.empty()) {
    const std::string& st = o.sharding;
    MT_CHECK(st == "no_shard" || st == "optim" || st == "optim_grads" ||
                 st == "optim_grads_params",
             "--data-parallel-sharding-strategy '", st, "' is not one of no_shard, optim, "
             "optim_grads, optim_grads_params");
    pins.sharding = st;
  }
  pins.bf16 = o.bf16;
  if (!o.recompute.empty()) pins.recompute = o.recompute;
  if (o.moe_layer_recompute && o.recompute.empty()) pins.recompute = "selective";
  std::vector<std::string> rejected;
  const std::vector<PlanLayout> layouts = enumerate_layouts(pb, pins, &rejected);
  if (on_layouts) on_layouts(layouts);
  if (layouts.empty()) {
    std::string why;
    for (size_t i = 0; i < rejected.size() && i < 5; ++i) why += "\n  " + rejected[i];
    MT_FAIL("no layout of ", pb.world, " ranks can run this model with these flags (",
            rejected.size(), " rejected):", why,
            "\nfix: change the pinned sizes, --global-batch-size or the cluster");
  }
  run.results = evaluate_layouts(pb, layouts, c);
  return run;
}

megatron::Layout public_layout(const PlanLayout& l) {
  megatron::Layout p;
  p.tp = l.tp, p.pp = l.pp, p.vp = l.vp, p.dp = l.dp, p.cp = l.cp, p.ep = l.ep;
  p.micro_batch_size = l.micro_batch_size;
  p.sequence_parallel = l.sequence_parallel;
  p.recompute = l.recompute;
  p.distributed_optimizer = l.distributed_optimizer;
  p.sharding = l.sharding;
  p.bf16 = l.bf16;
  return p;
}

PlanLayout private_layout(const megatron::Layout& p) {
  PlanLayout l;
  l.tp = p.tp, l.pp = p.pp, l.vp = p.vp, l.dp = p.dp, l.cp = p.cp, l.ep = p.ep;
  l.micro_batch_size = p.micro_batch_size;
  l.sequence_parallel = p.sequence_parallel;
  l.recompute = p.recompute;
  l.distributed_optimizer = p.distributed_optimizer;
  l.sharding = p.sharding;
  l.bf16 = p.bf16;
  return l;
}

megatron::LayoutPlan public_layout_plan(const PlanResult& r, const PlanCluster& c) {
  megatron::LayoutPlan p;
  p.layout = public_layout(r.layout);
  p.num_micro_batches = r.num_micro_batches;
  // As plan_result_json (`megatron plan --json`) counts them.
  const MemoryClasses& m = r.memory.most_loaded();
  p.memory.weight_and_optimizer_bytes = m.params + m.grads + m.optimizer;
  p.memory.activation_bytes = m.activations + m.workspace;
  p.memory.async_save_bytes = m.async_save;
  p.memory.total_bytes = m.total();
  p.step_time_s = r.time.total();
  p.tokens_per_s = r.tokens_per_s;
  p.tflops_per_device = r.tflops_per_device;
  p.mfu = r.mfu;
  p.fits = r.fits;
  if (!r.fits) p.misfit = misfit_reason(r, c);
  return p;
}

}  // namespace mt

namespace megatron {

std::string Layout::name() const { return mt::private_layout(*this).name(); }

std::vector<LayoutPlan> plan(const ModelConfig& model, const Cluster& cluster,
                             const PlanOptions& options) {
  return mt::config_errors([&] {
    const mt::PlanRun run =
        mt::run_plan_layouts(mt::private_model_config(model), cluster, options);
    std::vector<LayoutPlan> out;
    out.reserve(run.results.size());
    for (const mt::PlanResult& r : run.results) out.push_back(mt::public_layout_plan(r, run.c));
    return out;
  });
}

}  // namespace megatron
