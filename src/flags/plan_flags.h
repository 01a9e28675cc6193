// `megatron plan`'s flags, declared once: megatron::Planner (the binary's
// `plan`, include/megatron/plan.h) parses them, and `megatron config`'s check
// of the file it writes asks which flags plan takes (wizard/config_toml.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "model/config.h"

namespace mt {

// What the flags say (0 / false / empty: left out).
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

// The `plan` subcommand of `parent`, with its description (what `megatron
// --help` lists and `megatron plan --help` prints first); no flags yet.
CLI::App* add_plan_subcommand(CLI::App& parent);

// `megatron plan`'s flags on `app`, bound to the PlanArgs returned (filled by the parse).
std::shared_ptr<PlanArgs> add_plan_flags(CLI::App& app);

}  // namespace mt
