// `megatron plan`'s layouts: every way to run a model on a cluster that the
// given flags leave free (TP, PP, virtual stages, DP, micro-batch size, SP,
// recompute, distributed optimizer, precision), each checked with train's
// own validation (TrainArgs::validate: the same "cannot divide" messages), and
// its memory per rank predicted by train's one memory model for the first and
// the last pipeline stage.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "args/args.h"
#include "memory/memory_report.h"
#include "model/config.h"
#include "model/params.h"

namespace mt {

struct PlanLayout {
  int64_t tp = 1, pp = 1, vp = 1, dp = 1, cp = 1;
  int64_t ep = 1;  // MoE experts split over EP of the stage's TP x CP x DP ranks (not a factor of world)
  int64_t micro_batch_size = 1;
  bool sequence_parallel = false;
  std::string recompute = "selective";  // "selective" (PlanProblem's modules) | "full" (uniform, 1 layer)
  bool distributed_optimizer = false;
  // With distributed_optimizer: "" (--use-distributed-optimizer, ZeRO-1) or
  // Megatron-FSDP's "optim_grads" (ZeRO-2) / "optim_grads_params" (ZeRO-3).
  std::string sharding;
  bool bf16 = true;
  int64_t world() const { return tp * pp * dp * cp; }
  // "TP2 PP4 VP2 DP8 mbs1 SP full ZeRO bf16"
  std::string name() const;
};

// What the flags pin; an empty optional is free.
struct PlanPins {
  // cp: --context-parallel-size, enumerated only when pinned (else 1).
  // ep: --expert-model-parallel-size; left out, every EP dividing both the
  // experts and TP x CP x DP is tried (MoE models; 1 otherwise).
  std::optional<int64_t> tp, pp, cp, ep, layers_per_virtual_stage, micro_batch_size;
  std::optional<bool> sequence_parallel, distributed_optimizer, bf16;
  std::optional<std::string> recompute;  // "selective" | "full"
  // Megatron-FSDP's strategy (--use-megatron-fsdp): "optim", "optim_grads",
  // "optim_grads_params"; left out, a pinned --use-distributed-optimizer means
  // ZeRO-1 and a free one tries ZeRO-1, ZeRO-2 and ZeRO-3.
  std::optional<std::string> sharding;
};

// The most ranks `megatron plan` takes (nodes x devices per node, and any
// TP/PP/CP pin), so that it answers in seconds: every divisor pair of the
// world is a TP x PP candidate and node_crossing_of walks a group's ranks per
// (TP, PP, CP). At 720,720 ranks (240 divisors, the most below the limit) a
// 96-layer model plans in ~1.5 s on 2 cores; 2^20 ranks of 8 per node in
// ~1 s. Train's rank numbers are ints besides.
inline constexpr int64_t kMaxPlanRanks = int64_t(1) << 20;  // 1,048,576

// --num-nodes x --devices-per-node, or mt::Error naming both values and
// kMaxPlanRanks (each must be > 0; the product is computed without overflow).
int64_t plan_world_size(int64_t nodes, int64_t devices_per_node);

// The model and batch being planned: `model` as the flags give it
// (vocab_size the true vocabulary, padded per TP by Megatron's rule).
struct PlanProblem {
  ModelConfig model;
  int64_t global_batch_size = 0;
  int64_t world = 1;  // nodes x devices per node
  bool async_save = false;  // --async-save: its host copy of the state (memory_report.h)
  // What the selective layouts recompute besides the attention core
  // (Megatron's --recompute-modules and --moe-layer-recompute; TrainArgs::recompute).
  std::vector<std::string> recompute_modules;
  bool moe_layer_recompute = false;
};

// TrainArgs of `megatron train` for this layout (what its --log-memory and
// its checks see); data path and iterations are placeholders.
TrainArgs train_args_of(const PlanProblem& pb, const PlanLayout& l);

// Throws mt::Error with train's message when the layout cannot run
// (world size, heads, ffn, query groups, layers, virtual stages, batch...).
void check_layout(const PlanProblem& pb, const PlanLayout& l);

// Every layout the pins leave free that passes check_layout; `rejected`
// (optional) collects each distinct reason a candidate failed, with the
// first layout it rejected.
std::vector<PlanLayout> enumerate_layouts(const PlanProblem& pb, const PlanPins& pins,
                                          std::vector<std::string>* rejected = nullptr);

// Memory per rank of the first and the last pipeline stage (the same when PP = 1).
struct PlanMemory {
  MemoryClasses first, last;
  const MemoryClasses& most_loaded() const {
    return first.total() >= last.total() ? first : last;
  }
};

// The MemoryPlan of pipeline stage `pp_rank` of the layout, TP rank 0, as
// train builds it before allocating (trainer.cc: the same in-flight records).
MemoryPlan layout_memory_plan(const PlanProblem& pb, const PlanLayout& l, int64_t pp_rank);
// The same with the stage's registry given (stage_registry; callers cache it).
MemoryPlan layout_memory_plan(const PlanProblem& pb, const PlanLayout& l, int64_t pp_rank,
                              const ParamRegistry& reg);
// The parameter list of pipeline stage `pp_rank`, TP rank 0 (it depends on
// TP, PP and the virtual stages only).
ParamRegistry stage_registry(const PlanProblem& pb, const PlanLayout& l, int64_t pp_rank);
PlanMemory layout_memory(const PlanProblem& pb, const PlanLayout& l);

// Parameters the rank of pipeline stage `pp_rank` holds (TP rank 0).
int64_t layout_params_local(const PlanProblem& pb, const PlanLayout& l, int64_t pp_rank);

}  // namespace mt
