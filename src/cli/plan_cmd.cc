// `megatron plan`: memory and step time of every layout of a model on a
// cluster, before a rank is launched; `--calibrate` measures this machine.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/atomic_file.h"
#include "cli/commands.h"
#include "flags/model_flags.h"
#include "flags/strict_numbers.h"
#include "core/error.h"
#include "core/output_guard.h"
#include "comm/mpi_env.h"
#include "comm/parallel_state.h"
#include "plan/plan_calibrate.h"
#include "plan/plan_report.h"

namespace mt {

namespace {

struct PlanArgs {
  ModelConfig model;
  int64_t global_batch_size = 0;
  int64_t num_nodes = 1, devices_per_node = 1;
  std::string device;
  double device_memory_gb = 0;  // 0: the profile's memory_bytes
  int64_t tp = 0, pp = 0, cp = 0, ep = 0, layers_per_virtual_stage = 0, micro_batch_size = 0;
  bool sequence_parallel = false, distributed_optimizer = false, bf16 = false, fp32 = false;
  bool use_megatron_fsdp = false;
  bool async_save = false;
  std::string data_parallel_sharding_strategy = "no_shard";
  std::string recompute_granularity;
  std::vector<std::string> recompute_modules;
  bool moe_layer_recompute = false;
  int64_t top = 10;
  bool json = false;
  bool calibrate = false, calibrate_quick = false;
  std::string output;
  std::vector<std::string> config_files;  // --config (inputs --output must not replace)
};

int run_calibrate(const PlanArgs& a) {
  MpiEnv mpi;
  ParallelState ps(ParallelConfig{});
  const std::string path = a.output.empty() ? devices_dir() + "/cpu-here.json" : a.output;
  // --output must not replace a file this command reads (core/output_guard.h).
  OutputGuard paths;
  for (const std::string& c : a.config_files) paths.reads_file("--config", c);
  if (a.device.find('/') != std::string::npos || a.device.find(".json") != std::string::npos)
    paths.reads_file("--device", a.device);
  paths.writes_file("--output", a.output);
  paths.check();
  const CalibrateOptions opt = a.calibrate_quick ? CalibrateOptions::quick() : CalibrateOptions{};
  const DeviceProfile d = calibrate_device(ps.world_comm, "cpu-here", opt);
  if (ps.world_rank == 0) {
    // Written beside and renamed in: a failed write leaves the old profile whole.
    atomic_write_text(path, device_profile_to_json(d).dump(2) + "\n");
    std::printf("%s\nsaved %s\n", device_profile_to_json(d).dump(2).c_str(), path.c_str());
  }
  return 0;
}

int run_plan(const PlanArgs& a) {
  MT_CHECK(!a.device.empty(), "--device is required (a100-80gb, h100-80gb, cpu-here or FILE.json)");
  MT_CHECK(a.global_batch_size > 0, "--global-batch-size ", a.global_batch_size,
           " must be > 0 (it is required: plan sizes the micro-batches from it)");
  const int64_t world = plan_world_size(a.num_nodes, a.devices_per_node);  // <= kMaxPlanRanks
  // A pin above the limit is above the cluster too; refused here, so that
  // TP x CP x PP cannot overflow in the enumeration.
  for (const auto& [flag, pin] : {std::pair{"--tensor-model-parallel-size", a.tp},
                                  {"--pipeline-model-parallel-size", a.pp},
                                  {"--context-parallel-size", a.cp},
                                  {"--expert-model-parallel-size", a.ep}})
    MT_CHECK(pin <= kMaxPlanRanks, flag, " ", pin, " is more than the cluster's ", world,
             " ranks (and plan's limit of ", kMaxPlanRanks, "); fix: pin at most ", world);
  MT_CHECK(a.model.vocab_size > 0, "--vocab-size ", a.model.vocab_size,
           " must be > 0 (the true vocabulary; plan pads it by Megatron's rule)");
  MT_CHECK(a.cp >= 0, "--context-parallel-size ", a.cp, " must be >= 1");
  MT_CHECK(!(a.bf16 && a.fp32), "--bf16 and --fp32 are both set; choose one, or neither to "
           "compare both");
  MT_CHECK(a.top >= 0, "--top ", a.top, " must be >= 0 (0: all)");
  PlanCluster c;
  c.nodes = a.num_nodes;
  c.devices_per_node = a.devices_per_node;
  c.device = load_device_profile(a.device);
  MT_CHECK(a.device_memory_gb >= 0 && std::isfinite(a.device_memory_gb), "--device-memory-gb ",
           a.device_memory_gb, " must be > 0 (GB one rank may hold); fix: a positive number, "
           "or leave it out (or 0) for the profile's memory_bytes");
  if (a.device_memory_gb > 0) c.device.memory_bytes = a.device_memory_gb * 1e9;
  PlanProblem pb;
  pb.model = a.model;
  pb.model.check_flag_ranges();
  pb.global_batch_size = a.global_batch_size;
  pb.world = world;
  pb.async_save = a.async_save;
  pb.recompute_modules = a.recompute_modules;
  pb.moe_layer_recompute = a.moe_layer_recompute;
  PlanPins pins;
  if (a.tp > 0) pins.tp = a.tp;
  if (a.pp > 0) pins.pp = a.pp;
  if (a.cp > 0) pins.cp = a.cp;
  if (a.ep > 0) pins.ep = a.ep;
  if (a.layers_per_virtual_stage > 0) pins.layers_per_virtual_stage = a.layers_per_virtual_stage;
  if (a.micro_batch_size > 0) pins.micro_batch_size = a.micro_batch_size;
  if (a.sequence_parallel) pins.sequence_parallel = true;
  if (a.distributed_optimizer) pins.distributed_optimizer = true;
  if (a.use_megatron_fsdp) {
    const std::string& st = a.data_parallel_sharding_strategy;
    MT_CHECK(st == "no_shard" || st == "optim" || st == "optim_grads" ||
                 st == "optim_grads_params",
             "--data-parallel-sharding-strategy '", st, "' is not one of no_shard, optim, "
             "optim_grads, optim_grads_params");
    pins.sharding = st;
  }
  if (a.bf16) pins.bf16 = true;
  if (a.fp32) pins.bf16 = false;
  if (!a.recompute_granularity.empty()) pins.recompute = a.recompute_granularity;
  if (a.moe_layer_recompute && a.recompute_granularity.empty()) pins.recompute = "selective";
  std::vector<std::string> rejected;
  const std::vector<PlanLayout> layouts = enumerate_layouts(pb, pins, &rejected);
  // As train does (TrainArgs::disable_sequence_parallel_without_tp): TP 1
  // layouts are planned without SP, said once.
  if (a.sequence_parallel &&
      std::any_of(layouts.begin(), layouts.end(), [](const PlanLayout& l) { return l.tp == 1; }))
    std::fprintf(stderr, "warning: --sequence-parallel has no effect on layouts with TP 1 (it "
                 "splits the tensor-parallel layers' activations; TP 1 has none to split); "
                 "they are planned without it, as Megatron-LM trains them\n");
  if (layouts.empty()) {
    std::string why;
    for (size_t i = 0; i < rejected.size() && i < 5; ++i) why += "\n  " + rejected[i];
    MT_FAIL("no layout of ", pb.world, " ranks can run this model with these flags (",
            rejected.size(), " rejected):", why,
            "\nfix: change the pinned sizes, --global-batch-size or the cluster");
  }
  const std::vector<PlanResult> results = evaluate_layouts(pb, layouts, c);
  if (a.json) {
    const size_t n = a.top > 0 ? std::min(results.size(), size_t(a.top)) : results.size();
    for (size_t i = 0; i < n; ++i) std::printf("%s\n", plan_result_json(results[i]).dump().c_str());
  } else {
    std::printf("%s", format_plan(pb, c, results, a.top).c_str());
  }
  MT_CHECK(results[0].fits, "no layout fits in ", c.device.memory_bytes / 1e9,
           " GB per device; the smallest: ", misfit_reason(results[0], c),
           "; fix: more devices, a smaller micro-batch or model, --recompute-granularity full, "
           "--use-distributed-optimizer");
  return 0;
}

}  // namespace

Command add_plan_command(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--config", a->config_files,
                 "read flags from a TOML file of `flag-name = value` lines")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.footer(
      "Every layout the flags leave free (TP, PP, virtual stages, DP, micro-batch, SP, recompute,\n"
      "  distributed optimizer, bf16/fp32), with memory per rank from train's --log-memory model\n"
      "  and step time from the device profile; see docs/plan.md.");
  CLI::Option_group* model = app.add_option_group("model");
  add_model_flags(*model, a->model);
  model->add_option("--vocab-size", a->model.vocab_size,
                    "the true vocabulary (padded by --make-vocab-size-divisible-by x TP)");
  CLI::Option_group* cl = app.add_option_group("cluster");
  cl->add_option("--global-batch-size", a->global_batch_size, "sequences per iteration");
  cl->add_option("--num-nodes", a->num_nodes, "nodes (default 1)");
  cl->add_option("--devices-per-node", a->devices_per_node, "ranks per node (default 1)");
  cl->add_flag("--async-save", a->async_save,
              "count train --async-save's host copy of the weights and optimizer state");
  cl->add_option("--device", a->device,
                 "a100-80gb | h100-80gb | cpu-here | FILE.json (configs/devices/)");
  cl->add_option("--device-memory-gb", a->device_memory_gb,
                 "GB (10^9 bytes) one rank may hold (default: the profile's memory_bytes)");
  CLI::Option_group* pin = app.add_option_group("pins (left out: every value is tried)");
  pin->add_option("--tensor-model-parallel-size", a->tp, "TP size");
  pin->add_option("--pipeline-model-parallel-size", a->pp, "PP size");
  pin->add_option("--context-parallel-size", a->cp,
                  "CP size (left out: 1; context parallelism is tried only when pinned)");
  pin->add_option("--expert-model-parallel-size", a->ep,
                  "EP size of an MoE model (left out: every EP dividing the experts and TP x "
                  "CP x DP is tried)");
  pin->add_option("--num-layers-per-virtual-pipeline-stage", a->layers_per_virtual_stage,
                  "layers per model chunk (interleaved 1F1B)");
  pin->add_option("--micro-batch-size", a->micro_batch_size, "sequences per micro-batch");
  pin->add_flag("--sequence-parallel", a->sequence_parallel, "sequence parallelism on");
  pin->add_option("--recompute-granularity", a->recompute_granularity,
                  "selective (--recompute-modules) | full (uniform, 1 layer per group)");
  pin->add_option("--recompute-modules", a->recompute_modules,
                  "selective layouts: Megatron's modules (core_attn, always here; mlp: the dense "
                  "MLPs; moe: the MoE layers; layernorm, moe_act, shared_experts, mla_up_proj)");
  pin->add_flag("--moe-layer-recompute", a->moe_layer_recompute,
                "Megatron's alias: selective recompute with moe in --recompute-modules");
  pin->add_flag("--use-distributed-optimizer", a->distributed_optimizer, "ZeRO-1 on");
  pin->add_flag("--use-megatron-fsdp,--use-custom-fsdp", a->use_megatron_fsdp,
                "pin --data-parallel-sharding-strategy (else plan tries none, ZeRO-1, "
                "optim_grads and optim_grads_params)");
  pin->add_option("--data-parallel-sharding-strategy", a->data_parallel_sharding_strategy,
                  "with --use-megatron-fsdp: no_shard, optim, optim_grads, optim_grads_params");
  pin->add_flag("--bf16", a->bf16, "bf16 only");
  pin->add_flag("--fp32", a->fp32, "fp32 only");
  CLI::Option_group* out = app.add_option_group("output");
  out->add_option("--top", a->top, "layouts to print (default 10; 0: all)");
  out->add_flag("--json", a->json,
                "one JSON object per line, best first (fields: see docs/plan.md)");
  out->add_flag("--calibrate", a->calibrate,
                "measure this machine (GEMMs, memory bandwidth; links between ranks under "
                "mpirun -n 2) and save configs/devices/cpu-here.json");
  out->add_option("--output", a->output, "--calibrate: write the profile here instead");
  out->add_flag("--calibrate-quick", a->calibrate_quick,
                "--calibrate, with a quarter of the rows, one round and fewer repeats: the same "
                "fields, rougher, in a fraction of the time (tests)");
  make_integer_options_strict(app);
  return [a]() { return a->calibrate || a->calibrate_quick ? run_calibrate(*a) : run_plan(*a); };
}

}  // namespace mt
