#include "flags/plan_flags.h"

#include "flags/model_flags.h"
#include "flags/strict_numbers.h"

namespace mt {

CLI::App* add_plan_subcommand(CLI::App& parent) {
  return parent.add_subcommand(
      "plan", "memory and step time of every TP/PP/DP layout of a model on a cluster (no ranks)");
}

std::shared_ptr<PlanArgs> add_plan_flags(CLI::App& app) {
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
  return a;
}

}  // namespace mt
