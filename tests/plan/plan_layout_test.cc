// megatron plan's layouts: the enumeration keeps exactly the layouts train
// accepts (and honours pins), the memory of a layout is train's own plan (the
// same MemoryPlan as a live ModelRuntime's), and misfits name the constraint.
#include "plan/plan_layout.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/model_runtime.h"
#include "plan/plan_report.h"

namespace mt {
namespace plan_layout_test {

PlanProblem tiny(int64_t world, int64_t batch = 8) {
  PlanProblem pb;
  pb.model.num_layers = 4;
  pb.model.hidden_size = 64;
  pb.model.num_attention_heads = 4;
  pb.model.seq_length = 32;
  pb.model.vocab_size = 100;
  pb.model.make_vocab_size_divisible_by = 8;
  pb.global_batch_size = batch;
  pb.world = world;
  return pb;
}

// Stage `stage` of layout `l`: plan's activations and workspace are what a
// live runtime of that layout with `r` carves (up to each tensor's 64-byte
// alignment; its buffers round up to whole pages).
void expect_plan_is_the_carve(const PlanProblem& pb, const PlanLayout& l, const Recompute& r,
                              int64_t stage = 0) {
  const MemoryPlan p = layout_memory_plan(pb, l, stage);
  const ParamRegistry reg = stage_registry(pb, l, stage);
  ModelRuntime rt(reg, l.micro_batch_size, TensorParallel{}, p.in_flight, r,
                  l.bf16 ? MathMode::kBF16 : MathMode::kF32);
  const MemoryClasses m = predict_memory(p);
  Arena plan, plan_ws;
  for (int64_t i = 0; i < p.in_flight; ++i) carve_activations(plan, rt.chunks[0].sh);
  carve_workspace(plan_ws, rt.chunks[0].sh);
  const double act = double(plan.used()), ws = double(plan_ws.used());
  EXPECT_LE(act, double(rt.activations_buffer().size()));
  EXPECT_GE(act, m.activations) << l.name();
  EXPECT_LE(act, m.activations + 64.0 * 100) << l.name();
  EXPECT_GE(ws, m.workspace) << l.name();
  EXPECT_LE(ws, m.workspace + 64.0 * 40) << l.name();
}

TEST(PlanLayout, EnumeratesExactlyTheLayoutsTrainAccepts) {
  const PlanProblem pb = tiny(8);
  const std::vector<PlanLayout> ls = enumerate_layouts(pb, {});
  ASSERT_FALSE(ls.empty());
  std::set<std::string> names;
  std::set<int64_t> tps;
  for (const PlanLayout& l : ls) {
    EXPECT_EQ(l.world(), 8) << l.name();
    EXPECT_NO_THROW(check_layout(pb, l)) << l.name();
    EXPECT_TRUE(names.insert(l.name()).second) << "twice: " << l.name();
    EXPECT_EQ(pb.global_batch_size % (l.micro_batch_size * l.dp), 0) << l.name();
    EXPECT_TRUE(l.tp > 1 || !l.sequence_parallel) << l.name();
    EXPECT_TRUE(l.dp > 1 || !l.distributed_optimizer) << l.name();
    EXPECT_TRUE(l.distributed_optimizer || l.sharding.empty()) << l.name();
    tps.insert(l.tp);
  }
  // 4 heads: TP 1, 2, 4 (8 does not divide the heads); PP 1, 2, 4 of 4 layers.
  EXPECT_EQ(tps, (std::set<int64_t>{1, 2, 4}));
  // Interleaving: PP 2 with 2 virtual stages (1 layer per chunk) is there.
  bool interleaved = false;
  for (const PlanLayout& l : ls) interleaved |= l.pp == 2 && l.vp == 2;
  EXPECT_TRUE(interleaved);
  // Every layout train would accept is listed: count them independently.
  int64_t expected = 0;
  for (int64_t tp : {1, 2, 4})
    for (int64_t pp : {1, 2, 4}) {
      if (tp * pp > 8) continue;
      const int64_t dp = 8 / (tp * pp), per_dp = 8 / dp;
      for (int64_t vp : {1, 2, 4}) {
        if (vp > 1 && (pp == 1 || 4 % (pp * vp) != 0)) continue;
        for (int64_t b : {1, 2, 4, 8}) {
          if (per_dp % b != 0) continue;
          const int64_t m = per_dp / b;
          if (vp > 1 && m % pp != 0) continue;
          // Sharding with DP: none, ZeRO-1, and Megatron-FSDP's optim_grads, optim_grads_params.
          expected += (tp > 1 ? 2 : 1) * 2 /*recompute*/ * (dp > 1 ? 4 : 1) * 2 /*precision*/;
        }
      }
    }
  EXPECT_EQ(int64_t(ls.size()), expected);
}

TEST(PlanLayout, PinsAreHonoured) {
  const PlanProblem pb = tiny(8);
  PlanPins pins;
  pins.tp = 2;
  pins.pp = 2;
  pins.micro_batch_size = 1;
  pins.bf16 = true;
  pins.recompute = "full";
  pins.distributed_optimizer = true;
  const std::vector<PlanLayout> ls = enumerate_layouts(pb, pins);
  ASSERT_FALSE(ls.empty());
  for (const PlanLayout& l : ls) {
    EXPECT_EQ(l.tp, 2);
    EXPECT_EQ(l.pp, 2);
    EXPECT_EQ(l.dp, 2);
    EXPECT_EQ(l.micro_batch_size, 1);
    EXPECT_TRUE(l.bf16);
    EXPECT_EQ(l.recompute, "full");
    EXPECT_TRUE(l.distributed_optimizer);
    EXPECT_EQ(l.sharding, "") << "--use-distributed-optimizer pins ZeRO-1";
  }
  // Free: SP on/off and VP 1/2 (m = 4 is divisible by PP 2).
  EXPECT_EQ(ls.size(), 4u);
  pins.sharding = "optim_grads_params";  // Megatron-FSDP's ZeRO-3 pinned
  for (const PlanLayout& l : enumerate_layouts(pb, pins)) {
    EXPECT_TRUE(l.distributed_optimizer);
    EXPECT_EQ(l.sharding, "optim_grads_params");
    EXPECT_NE(l.name().find(" ZeRO-3"), std::string::npos) << l.name();
  }
}

TEST(PlanLayout, MisfitsNameTheConstraintAsTrainDoes) {
  const PlanProblem pb = tiny(6);
  PlanLayout l;
  l.tp = 3, l.dp = 2;
  try {
    check_layout(pb, l);
    FAIL() << "TP 3 with 4 heads accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--num-attention-heads 4 is not divisible by TP 3"),
              std::string::npos) << e.what();
  }
  PlanPins pins;
  pins.pp = 4;  // 6 ranks are not divisible by PP 4
  std::vector<std::string> rejected;
  EXPECT_TRUE(enumerate_layouts(pb, pins, &rejected).empty());
  ASSERT_FALSE(rejected.empty());
  bool world = false;
  for (const std::string& r : rejected) world |= r.find("world size 6") != std::string::npos;
  EXPECT_TRUE(world) << rejected[0];
  // Global batch 6 with DP 4 (world 4) and TP 1: 6 % 4.
  const PlanProblem odd = tiny(4, 6);
  PlanLayout d;
  d.dp = 4;
  try {
    check_layout(odd, d);
    FAIL() << "batch 6 over DP 4 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--global-batch-size 6 is not divisible"),
              std::string::npos) << e.what();
  }
}

// The cluster's size is checked before anything is enumerated: a product past
// int64 or past kMaxPlanRanks is refused naming the flags, values and limit
// (65536 x 65536 ran ~115 s and ended in SIGFPE; 2 x 2^30 printed DP < 0).
TEST(PlanLayout, ClusterSizeIsCheckedAgainstTheLimit) {
  EXPECT_EQ(plan_world_size(2, 4), 8);
  EXPECT_EQ(plan_world_size(1024, 1024), kMaxPlanRanks);
  auto message = [](int64_t nodes, int64_t per_node) {
    try {
      plan_world_size(nodes, per_node);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string big = message(65536, 65536);
  EXPECT_NE(big.find("--num-nodes 65536 x --devices-per-node 65536 = 4294967296 ranks is more "
                     "than plan's limit of 1048576"), std::string::npos) << big;
  EXPECT_NE(message(2, int64_t(1) << 30).find("2147483648 ranks"), std::string::npos);
  EXPECT_NE(message(1024, 1025).find("1049600 ranks"), std::string::npos);
  EXPECT_NE(message(int64_t(1) << 40, int64_t(1) << 40).find("overflows"), std::string::npos);
  EXPECT_NE(message(0, 8).find("must be > 0"), std::string::npos);
  EXPECT_NE(message(8, -1).find("must be > 0"), std::string::npos);
}

// Qwen's attention options (a head size apart from h/a, the q/k norms, the
// QKV bias): plan's activations and workspace are what a live runtime of that
// layout carves (up to each tensor's 64-byte alignment), and its parameters
// the runtime's count.
TEST(PlanLayout, MemoryWithQwenAttentionIsWhatTheRuntimeCarves) {
  PlanProblem pb = tiny(2, 8);
  pb.model.kv_channels = 32;  // a·d = 128 = 2h
  pb.model.qk_layernorm = true;
  pb.model.add_qkv_bias = true;
  pb.model.disable_bias_linear = true;
  pb.model.normalization = "RMSNorm";
  pb.model.group_query_attention = true;
  pb.model.num_query_groups = 2;
  for (bool bf16 : {false, true}) {
    PlanLayout l;
    l.dp = 2, l.micro_batch_size = 2, l.bf16 = bf16, l.recompute = "selective";
    ASSERT_NO_THROW(check_layout(pb, l)) << l.name();
    const MemoryPlan p = layout_memory_plan(pb, l, 0);
    EXPECT_EQ(p.head_dim, 32);
    EXPECT_TRUE(p.qk_layernorm);
    expect_plan_is_the_carve(pb, l, Recompute{});
  }
}

// Selective recompute of the MoE layers (Megatron's --recompute-modules moe,
// --moe-layer-recompute) and of the dense MLPs (mlp), on a model whose first
// layer is dense: plan's memory is what the runtime recomputing them carves
// and the runtime's own plan; each layer's MLP record leaves the activations
// (one shared record joins the workspace), so activations shrink per record
// in flight and the workspace grows by one record; the last stage's MTP
// depth (an MoE layer) drops its record too.
TEST(PlanLayout, MemoryWithMoeRecomputeIsWhatTheRuntimeCarves) {
  PlanProblem pb = tiny(2, 8);
  pb.model.num_experts = 4;
  pb.model.moe_router_topk = 2;
  pb.model.moe_layer_freq = "[0]+[1]*3";
  pb.model.mtp_num_layers = 1;
  pb.model.position_embedding_type = "rope";
  PlanLayout l;
  l.pp = 2, l.micro_batch_size = 2, l.bf16 = false;
  const MemoryClasses keep = predict_memory(layout_memory_plan(pb, l, 0));
  double before = keep.activations;
  for (const std::vector<std::string>& modules :
       {std::vector<std::string>{"moe"}, std::vector<std::string>{"core_attn", "mlp", "moe"}}) {
    pb.recompute_modules = modules;
    ASSERT_NO_THROW(check_layout(pb, l)) << l.name();
    const MemoryPlan p = layout_memory_plan(pb, l, 0);
    const MemoryClasses m = predict_memory(p);
    EXPECT_LT(m.activations, before) << modules.size();
    EXPECT_GT(m.workspace, keep.workspace) << modules.size();
    before = m.activations;
    const Recompute r{"", 0, modules};
    expect_plan_is_the_carve(pb, l, r);
    expect_plan_is_the_carve(pb, l, r, 1);
    const ParamRegistry reg = stage_registry(pb, l, 0);
    ModelRuntime rt(reg, l.micro_batch_size, TensorParallel{}, p.in_flight, r);
    EXPECT_DOUBLE_EQ(predict_memory(memory_plan(rt, l.dp, false)).total(), m.total());
  }
  // --moe-layer-recompute is the same as moe added to the modules.
  PlanProblem alias = pb;
  alias.recompute_modules = {};
  alias.moe_layer_recompute = true;
  pb.recompute_modules = {"moe"};
  EXPECT_DOUBLE_EQ(predict_memory(layout_memory_plan(alias, l, 0)).total(),
                   predict_memory(layout_memory_plan(pb, l, 0)).total());
}

// The partial modules (moe_act, shared_experts, mla_up_proj) on a
// DeepSeek-shaped model (MLA with the q latent, grouped experts with a shared
// one, a dense first layer, an MTP depth): plan's memory is what the runtime
// carves on both stages, and the runtime's own plan; each moves its outputs
// from every layer's record to one workspace buffer, so the activations
// shrink and the workspace grows; with moe they add nothing to moe alone
// (the whole MoE layer is recomputed, as in Megatron).
TEST(PlanLayout, MemoryWithPartialRecomputeIsWhatTheRuntimeCarves) {
  PlanProblem pb = tiny(2, 8);
  ModelConfig& c = pb.model;
  c.num_experts = 4, c.moe_router_topk = 2, c.moe_layer_freq = "[0]+[1]*3";
  c.moe_shared_expert_intermediate_size = 32, c.moe_grouped_gemm = true;
  c.disable_bias_linear = true, c.mtp_num_layers = 1;
  c.position_embedding_type = "rope", c.multi_latent_attention = true;
  c.q_lora_rank = 12, c.kv_lora_rank = 8, c.qk_head_dim = 8, c.qk_pos_emb_head_dim = 4;
  c.v_head_dim = 6, c.qk_layernorm = true;
  PlanLayout l;
  l.pp = 2, l.micro_batch_size = 2, l.bf16 = false;
  const MemoryClasses keep = predict_memory(layout_memory_plan(pb, l, 0));
  pb.recompute_modules = {"moe"};
  const MemoryClasses moe = predict_memory(layout_memory_plan(pb, l, 0));
  for (const std::vector<std::string>& modules :
       {std::vector<std::string>{"moe_act"}, std::vector<std::string>{"shared_experts"},
        std::vector<std::string>{"mla_up_proj"},
        std::vector<std::string>{"moe_act", "shared_experts", "mla_up_proj", "layernorm"},
        std::vector<std::string>{"moe", "moe_act", "shared_experts"}}) {
    const std::string what = modules[0] + " +" + std::to_string(modules.size() - 1);
    pb.recompute_modules = modules;
    ASSERT_NO_THROW(check_layout(pb, l)) << what;
    const MemoryPlan p = layout_memory_plan(pb, l, 0);
    const MemoryClasses m = predict_memory(p);
    EXPECT_LT(m.activations, keep.activations) << what;
    EXPECT_GT(m.workspace, keep.workspace) << what;
    if (modules[0] == "moe") {
      EXPECT_DOUBLE_EQ(m.activations, moe.activations) << what;
      EXPECT_DOUBLE_EQ(m.workspace, moe.workspace) << what;
    }
    const Recompute r{"", 0, modules};
    expect_plan_is_the_carve(pb, l, r);
    expect_plan_is_the_carve(pb, l, r, 1);
    const ParamRegistry reg = stage_registry(pb, l, 0);
    ModelRuntime rt(reg, l.micro_batch_size, TensorParallel{}, p.in_flight, r);
    EXPECT_DOUBLE_EQ(predict_memory(memory_plan(rt, l.dp, false)).total(), m.total()) << what;
  }
}

// A world of many divisors (720,720 = 2^4·3^2·5·7·11·13: 240 divisors, ~7,300
// TP x PP pairs) still enumerates every layout train accepts (only the
// variants of a combination that already failed are skipped).
TEST(PlanLayout, ManyDivisorsEnumerateTheSameLayouts) {
  PlanProblem pb = tiny(720720, 720720 * 2);
  const std::vector<PlanLayout> ls = enumerate_layouts(pb, {});
  ASSERT_FALSE(ls.empty());
  for (const PlanLayout& l : ls) EXPECT_EQ(l.world(), 720720) << l.name();
  // 4 heads: TP 1, 2, 4; PP 1, 2, 4 divide 4 layers; each (TP, PP) with DP =
  // 720720 / (TP x PP) and per-DP batch 2 x TP x PP, so micro-batches 1, 2, ...
  std::set<std::pair<int64_t, int64_t>> tp_pp;
  for (const PlanLayout& l : ls) tp_pp.insert({l.tp, l.pp});
  EXPECT_EQ(tp_pp.size(), 9u);
}

// The plan of a layout is the MemoryPlan a live ModelRuntime reports for the
// same registry, micro-batch, records in flight, recompute and math (TP 1:
// a runtime of TP > 1 needs a communicator).
TEST(PlanLayout, MemoryIsTheRuntimesOwnPlan) {
  PlanProblem pb = tiny(4, 16);
  for (bool bf16 : {false, true})
    for (const char* rc : {"selective", "full"})
      for (int64_t pp : {1, 2, 4})
        for (int64_t vp : {int64_t(1), pp == 2 ? int64_t(2) : int64_t(1)}) {
          PlanLayout l;
          l.pp = pp, l.vp = vp, l.dp = 4 / pp, l.micro_batch_size = 2;
          l.bf16 = bf16, l.recompute = rc, l.distributed_optimizer = l.dp > 1;
          ASSERT_NO_THROW(check_layout(pb, l)) << l.name();
          for (int64_t stage : {int64_t(0), pp - 1}) {
            const MemoryPlan p = layout_memory_plan(pb, l, stage);
            const ParamRegistry reg = stage_registry(pb, l, stage);
            const std::string method = l.recompute == "full" ? "uniform" : "";
            ModelRuntime rt(reg, l.micro_batch_size, TensorParallel{}, p.in_flight, Recompute{method, 1},
                            bf16 ? MathMode::kBF16 : MathMode::kF32);
            const MemoryPlan q = memory_plan(rt, l.dp, l.distributed_optimizer);
            const std::string what = l.name() + " stage " + std::to_string(stage);
            EXPECT_EQ(p.params_local, q.params_local) << what;
            EXPECT_EQ(p.layers, q.layers) << what;
            EXPECT_EQ(p.chunks, q.chunks) << what;
            EXPECT_EQ(p.in_flight, q.in_flight) << what;
            EXPECT_EQ(p.recompute_layers_kept, q.recompute_layers_kept) << what;
            EXPECT_EQ(p.recompute_group_size, q.recompute_group_size) << what;
            EXPECT_EQ(p.has_output, q.has_output) << what;
            EXPECT_EQ(p.math, q.math) << what;
            const MemoryClasses a = predict_memory(p), b = predict_memory(q);
            EXPECT_DOUBLE_EQ(a.total(), b.total()) << what;
            EXPECT_DOUBLE_EQ(a.activations, b.activations) << what;
          }
          // Pipelining keeps P - r records on stage r (1F1B): the first stage
          // holds more activation records than the last.
          if (pp > 1 && vp == 1) {
            EXPECT_GT(layout_memory_plan(pb, l, 0).in_flight,
                      layout_memory_plan(pb, l, pp - 1).in_flight);
          }
        }
}

TEST(PlanLayout, TensorParallelDividesTheLocalSizes) {
  PlanProblem pb = tiny(4);
  PlanLayout l;
  l.tp = 4, l.sequence_parallel = true;
  const MemoryPlan p = layout_memory_plan(pb, l, 0);
  EXPECT_EQ(p.tp, 4);
  EXPECT_EQ(p.a_local, 1);
  EXPECT_EQ(p.f_local, 64);
  EXPECT_EQ(p.v_local * 4, 128);  // 100 padded to a multiple of 8 x TP 4
  EXPECT_TRUE(p.sequence_parallel);
}

}  // namespace plan_layout_test
}  // namespace mt

namespace mt {
namespace plan_layout_test {

// An MoE model: EP is enumerated (each dividing the experts and the stage's
// TP x CP x DP ranks), each rank's parameters hold E/EP experts, and the
// step time names the all-to-all.
TEST(PlanLayout, MixtureOfExpertsEnumeratesExpertParallelism) {
  PlanProblem pb = tiny(8, 16);
  pb.model.num_experts = 4;
  pb.model.moe_router_topk = 2;
  std::set<int64_t> eps;
  for (const PlanLayout& l : enumerate_layouts(pb, PlanPins{})) {
    eps.insert(l.ep);
    EXPECT_EQ(pb.model.num_experts % l.ep, 0) << l.name();
    EXPECT_EQ(l.tp * l.cp * l.dp % l.ep, 0) << l.name();
  }
  EXPECT_EQ(eps, (std::set<int64_t>{1, 2, 4}));
  PlanPins pins;
  pins.ep = 2;
  for (const PlanLayout& l : enumerate_layouts(pb, pins)) EXPECT_EQ(l.ep, 2) << l.name();
  PlanLayout l;
  l.dp = 8, l.micro_batch_size = 2;
  const int64_t whole = layout_params_local(pb, l, 0);
  l.ep = 4;
  ASSERT_NO_THROW(check_layout(pb, l));
  const int64_t split = layout_params_local(pb, l, 0);
  // 4 layers x 4 experts x (fc1 + fc2 + biases): 3/4 of them leave each rank.
  EXPECT_LT(split, whole);
  PlanCluster c;
  c.devices_per_node = 2;
  c.nodes = 4;
  const NodeCrossing x = node_crossing_of(l, c);
  EXPECT_EQ(x.ep, 2) << "EP 4 over nodes of 2 ranks spans 2 nodes";
  EXPECT_NE(x.describe().find("EP (all-to-all) across 2 nodes"), std::string::npos)
      << x.describe();
}

}  // namespace plan_layout_test
}  // namespace mt
