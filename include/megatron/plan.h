// megatron/plan.h — `megatron plan` as a library call: every layout of a model
// on a cluster (TP, PP, virtual stages, DP, CP, EP, micro-batch, sequence
// parallelism, recompute, distributed optimizer, precision), each with the
// memory of its most loaded rank (train's own memory model, what `megatron
// train --log-memory` reports) and its step time from the device's profile,
// ranked fastest first, before a rank is launched.
//
//   megatron::Cluster cluster;
//   cluster.nodes = 2;
//   cluster.devices_per_node = 8;
//   cluster.device = "h100-80gb";
//   megatron::PlanOptions options;
//   options.global_batch_size = 256;
//   for (const megatron::LayoutPlan& p : megatron::plan(megatron::named_model("llama3-8b"),
//                                                       cluster, options))
//     std::printf("%s %.2f s %s\n", p.layout.name().c_str(), p.step_time_s,
//                 p.fits ? "fits" : p.misfit.c_str());
//
// A Planner takes `megatron plan`'s flags instead and prints what the command
// prints (a table, or --json lines).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "megatron/config.h"
#include "megatron/flags.h"

namespace megatron {

// The machines a model is planned on.
struct Cluster {
  int64_t nodes = 1;
  int64_t devices_per_node = 1;  // ranks per node
  // A device profile: a100-80gb, h100-80gb, cpu-here (configs/devices: what
  // `megatron plan --calibrate` measured) or a FILE.json.
  std::string device;
  double device_memory_gb = 0;  // GB (10^9 bytes) one rank may hold; 0: the profile's
};

// One way to run the model: the sizes multiply to the world (tp x pp x dp x cp).
struct Layout {
  int64_t tp = 1, pp = 1;
  int64_t vp = 1;  // model chunks per pipeline stage (interleaved 1F1B)
  int64_t dp = 1, cp = 1;
  int64_t ep = 1;  // an MoE model's experts over EP of the TP x CP x DP ranks
  int64_t micro_batch_size = 1;
  bool sequence_parallel = false;
  std::string recompute = "selective";  // selective | full
  bool distributed_optimizer = false;
  // With distributed_optimizer: "" (ZeRO-1), "optim_grads" (ZeRO-2) or
  // "optim_grads_params" (ZeRO-3: Megatron-FSDP's).
  std::string sharding;
  bool bf16 = true;
  // As `megatron plan` names it: "TP2 PP4 VP2 DP8 mbs1 SP full ZeRO bf16".
  std::string name() const;
};

// The batch, what the layouts must keep, and what they are free in (a pin
// left empty or 0: every value is tried).
struct PlanOptions {
  int64_t global_batch_size = 0;  // sequences per iteration (required)
  bool async_save = false;        // count train --async-save's host copy of the state
  // What the selective layouts recompute besides the attention core
  // (Megatron's --recompute-modules: mlp, moe, layernorm, moe_act, ...).
  std::vector<std::string> recompute_modules;
  bool moe_layer_recompute = false;  // Megatron's alias: moe among them
  // Pins.
  int64_t tp = 0, pp = 0;
  int64_t cp = 0;  // 0: 1 (context parallelism is tried only when pinned)
  int64_t ep = 0;  // 0: every EP dividing the experts and TP x CP x DP
  int64_t layers_per_virtual_stage = 0, micro_batch_size = 0;
  std::optional<bool> sequence_parallel, distributed_optimizer, bf16;
  std::string recompute;  // "" | selective | full
  std::string sharding;   // "" | optim | optim_grads | optim_grads_params (pins the optimizer)
};

// Bytes one rank holds (the most loaded pipeline stage's, as `megatron train
// --log-memory` predicts them).
struct LayoutMemory {
  double weight_and_optimizer_bytes = 0;  // weights, gradients, optimizer state
  double activation_bytes = 0;
  double async_save_bytes = 0;            // PlanOptions::async_save's host copy
  double total_bytes = 0;                 // all of it (buffers and the above included)
};

struct LayoutPlan {
  Layout layout;
  int64_t num_micro_batches = 1;
  LayoutMemory memory;
  double step_time_s = 0;
  double tokens_per_s = 0, tflops_per_device = 0, mfu = 0;
  bool fits = false;   // the most loaded rank fits the device's memory
  std::string misfit;  // when it does not: the stage, its bytes, the device's, the biggest class
};

// Every layout of `model` on `cluster` the options leave free, the ones that
// fit first, fastest first (by tokens/s); then those that do not fit, by how
// little they overflow. Throws ConfigError when the input is refused or no
// layout can run the model (naming the first reasons and the fix).
std::vector<LayoutPlan> plan(const ModelConfig& model, const Cluster& cluster,
                             const PlanOptions& options);

// `megatron plan` from its flags: the model flags (Megatron-LM's names,
// --vocab-size), the cluster's, the pins, --top, --json; --calibrate measures
// this machine (a collective: under mpirun -n R the links too) and writes
// configs/devices/cpu-here.json, or --output.
class Planner {
 public:
  // `words`: the arguments after `megatron plan` (and `--config FILE`).
  // Throws FlagError (FlagHelp for --help, what() the usage).
  explicit Planner(const std::vector<std::string>& words);
  ~Planner();
  Planner(const Planner&) = delete;
  Planner& operator=(const Planner&) = delete;

  // What the flags give: the model, the cluster and the options.
  ModelConfig model() const;
  Cluster cluster() const;
  PlanOptions options() const;

  // `megatron plan`: prints the layouts (--top of them: a table, or --json
  // lines) or calibrates; returns 0. An error (no layout fits, a bad profile)
  // ends the whole job with one line, as the binary does.
  int run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace megatron
