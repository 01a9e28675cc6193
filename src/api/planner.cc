// megatron::Planner (include/megatron/plan.h): `megatron plan`'s flags
// (flags/plan_flags.h) parsed from its words, and its run: the layouts
// (api/plan.cc's run_plan_layouts, as megatron::plan()) printed as a table or
// JSON lines, or --calibrate's measurement of this machine. The binary's
// `plan` (cli/plan_cmd.cc) is a client of it.
#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "api/job_errors.h"
#include "api/model_config.h"
#include "api/plan_run.h"
#include "checkpoint/atomic_file.h"
#include "comm/mpi_env.h"
#include "comm/parallel_state.h"
#include "core/error.h"
#include "core/output_guard.h"
#include "flags/command_words.h"
#include "flags/plan_flags.h"
#include "plan/plan_calibrate.h"
#include "plan/plan_report.h"

namespace megatron {

namespace {

int run_calibrate(const mt::PlanArgs& a) {
  mt::MpiEnv mpi;
  mt::ParallelState ps(mt::ParallelConfig{});
  const std::string path = a.output.empty() ? mt::devices_dir() + "/cpu-here.json" : a.output;
  // --output must not replace a file this command reads (core/output_guard.h).
  mt::OutputGuard paths;
  for (const std::string& c : a.config_files) paths.reads_file("--config", c);
  if (a.device.find('/') != std::string::npos || a.device.find(".json") != std::string::npos)
    paths.reads_file("--device", a.device);
  paths.writes_file("--output", a.output);
  paths.check();
  const mt::CalibrateOptions opt =
      a.calibrate_quick ? mt::CalibrateOptions::quick() : mt::CalibrateOptions{};
  const mt::DeviceProfile d = mt::calibrate_device(ps.world_comm, "cpu-here", opt);
  if (ps.world_rank == 0) {
    // Written beside and renamed in: a failed write leaves the old profile whole.
    mt::atomic_write_text(path, mt::device_profile_to_json(d).dump(2) + "\n");
    std::printf("%s\nsaved %s\n", mt::device_profile_to_json(d).dump(2).c_str(), path.c_str());
  }
  return 0;
}

Cluster cluster_of(const mt::PlanArgs& a) {
  Cluster c;
  c.nodes = a.num_nodes;
  c.devices_per_node = a.devices_per_node;
  c.device = a.device;
  c.device_memory_gb = a.device_memory_gb;
  return c;
}

PlanOptions options_of(const mt::PlanArgs& a) {
  PlanOptions o;
  o.global_batch_size = a.global_batch_size;
  o.async_save = a.async_save;
  o.recompute_modules = a.recompute_modules;
  o.moe_layer_recompute = a.moe_layer_recompute;
  o.tp = a.tp, o.pp = a.pp, o.cp = a.cp, o.ep = a.ep;
  o.layers_per_virtual_stage = a.layers_per_virtual_stage;
  o.micro_batch_size = a.micro_batch_size;
  if (a.sequence_parallel) o.sequence_parallel = true;
  if (a.distributed_optimizer) o.distributed_optimizer = true;
  if (a.bf16) o.bf16 = true;
  if (a.fp32) o.bf16 = false;  // both: refused by run_plan's checks
  o.recompute = a.recompute_granularity;
  // --data-parallel-sharding-strategy counts only with --use-megatron-fsdp.
  if (a.use_megatron_fsdp) o.sharding = a.data_parallel_sharding_strategy;
  return o;
}

int run_plan(const mt::PlanArgs& a) {
  const mt::PlanRun run = mt::run_plan_layouts(
      a.model, cluster_of(a), options_of(a),
      [&] {
        MT_CHECK(!(a.bf16 && a.fp32), "--bf16 and --fp32 are both set; choose one, or neither "
                 "to compare both");
        MT_CHECK(a.top >= 0, "--top ", a.top, " must be >= 0 (0: all)");
      },
      [&](const std::vector<mt::PlanLayout>& layouts) {
        // As train does (TrainArgs::disable_sequence_parallel_without_tp): TP 1
        // layouts are planned without SP, said once.
        if (a.sequence_parallel && std::any_of(layouts.begin(), layouts.end(),
                                               [](const mt::PlanLayout& l) { return l.tp == 1; }))
          std::fprintf(stderr, "warning: --sequence-parallel has no effect on layouts with TP 1 "
                       "(it splits the tensor-parallel layers' activations; TP 1 has none to "
                       "split); they are planned without it, as Megatron-LM trains them\n");
      });
  const std::vector<mt::PlanResult>& results = run.results;
  if (a.json) {
    const size_t n = a.top > 0 ? std::min(results.size(), size_t(a.top)) : results.size();
    for (size_t i = 0; i < n; ++i)
      std::printf("%s\n", mt::plan_result_json(results[i]).dump().c_str());
  } else {
    std::printf("%s", mt::format_plan(run.pb, run.c, results, a.top).c_str());
  }
  MT_CHECK(results[0].fits, "no layout fits in ", run.c.device.memory_bytes / 1e9,
           " GB per device; the smallest: ", mt::misfit_reason(results[0], run.c),
           "; fix: more devices, a smaller micro-batch or model, --recompute-granularity full, "
           "--use-distributed-optimizer");
  return 0;
}

}  // namespace

struct Planner::Impl {
  CLI::App app{"megatron.cpp as a library: megatron plan"};
  std::shared_ptr<mt::PlanArgs> args;
};

Planner::Planner(const std::vector<std::string>& words) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.app.require_subcommand(1);
  CLI::App* plan = mt::add_plan_subcommand(s.app);
  s.args = mt::add_plan_flags(*plan);
  mt::parse_command_words(s.app, *plan, words);
}

Planner::~Planner() = default;

ModelConfig Planner::model() const { return mt::public_model_config(impl_->args->model); }
Cluster Planner::cluster() const { return cluster_of(*impl_->args); }
PlanOptions Planner::options() const { return options_of(*impl_->args); }

int Planner::run() {
  const mt::PlanArgs& a = *impl_->args;
  return mt::ending_job_on_error(
      [&] { return a.calibrate || a.calibrate_quick ? run_calibrate(a) : run_plan(a); });
}

}  // namespace megatron
