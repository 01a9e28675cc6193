// megatron plan's step-time model: ring α–β costs per collective, which
// groups cross nodes (tp-dp-pp rank order), the 1F1B bubble of unequal
// stages, bf16's curve, the attention core's rate, ranks sharing cores, the
// levers moving time the way they must, and the ranking with its reasons.
#include "plan/plan_time.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "comm/parallel_state.h"

#include "plan/plan_report.h"

namespace mt {
namespace plan_time_test {

DeviceProfile flat_device() {
  DeviceProfile d;
  d.name = "test";
  d.source = "test";
  d.memory_bytes = 1e12;
  d.memory_bandwidth_bytes_per_s = 1e12;
  d.peak_flops_fp32 = 1e12;
  d.peak_flops_bf16 = 2e12;
  d.gemm_efficiency = {{1e6, 0.5}, {1e10, 1.0}};
  d.intra_node = {1e11, 1e-6};
  d.inter_node = {1e10, 1e-5};
  return d;
}

PlanProblem model(int64_t world, int64_t batch) {
  PlanProblem pb;
  pb.model.num_layers = 8;
  pb.model.hidden_size = 512;
  pb.model.num_attention_heads = 8;
  pb.model.seq_length = 256;
  pb.model.vocab_size = 1000;
  pb.global_batch_size = batch;
  pb.world = world;
  return pb;
}

StepTime time_of(const PlanProblem& pb, const PlanLayout& l, const PlanCluster& c) {
  ModelConfig m = pb.model;
  m.finalize(l.tp);
  return predict_step_time(m, pb, l, c, node_crossing_of(l, c), stage_registry(pb, l, 0),
                           stage_registry(pb, l, l.pp - 1));
}

TEST(PlanTime, RingCosts) {
  const LinkProfile link{1e9, 1e-5};
  EXPECT_DOUBLE_EQ(all_reduce_seconds(1e9, 1, link), 0);
  EXPECT_DOUBLE_EQ(all_reduce_seconds(1e9, 4, link), 2 * 0.75 + 6 * 1e-5);
  EXPECT_DOUBLE_EQ(reduce_scatter_seconds(1e9, 4, link), 0.75 + 3 * 1e-5);
  EXPECT_DOUBLE_EQ(p2p_seconds(1e9, link), 1 + 1e-5);
}

// Context parallelism: the ring's steps per micro-batch and layer (forward
// CP-1 K|V messages, backward CP-1 K|V and CP fp32 dK|dV, each
// 2·b·g·(s/CP)·d elements) at the CP group's link (CP sits next to TP: inside
// a node of 8 at TP2 CP2, across nodes of 2 at TP2 CP2); each rank computes
// half the tokens, so compute falls against the same DP.
TEST(PlanTime, ContextParallelRingAndHalfTheTokens) {
  const PlanProblem pb = model(4, 8);  // 8 layers, h 512, 8 heads (d 64), s 256
  PlanLayout cp2;
  cp2.tp = 2, cp2.cp = 2, cp2.dp = 1, cp2.micro_batch_size = 1, cp2.bf16 = false;
  PlanLayout tp2 = cp2;
  tp2.cp = 1, tp2.dp = 2;
  const PlanCluster inside{1, 4, flat_device()}, across{2, 2, flat_device()};
  const double msg = 2 * 1 * 8.0 / 2 * (256 / 2) * 64;  // elements: b=1, g/t=4, s/CP=128, d=64
  const double per_layer = 2 * p2p_seconds(msg * 4, inside.device.intra_node) +
                           2 * p2p_seconds(msg * 4, inside.device.intra_node);
  const double m = 8;  // micro-batches: 8 / (1 x DP 1)
  EXPECT_NEAR(time_of(pb, cp2, inside).cp_comm, m * 8 * per_layer, 1e-12);
  EXPECT_EQ(time_of(pb, tp2, inside).cp_comm, 0);
  const double across_layer = 2 * p2p_seconds(msg * 4, across.device.inter_node) +
                              2 * p2p_seconds(msg * 4, across.device.inter_node);
  EXPECT_NEAR(time_of(pb, cp2, across).cp_comm, m * 8 * across_layer, 1e-12);
  // Per micro-batch CP2 does half of TP2 x DP2's tokens, with twice the micro-batches.
  EXPECT_LT(time_of(pb, cp2, inside).compute, 1.1 * time_of(pb, tp2, inside).compute);
  EXPECT_GT(time_of(pb, cp2, inside).compute, 0.9 * time_of(pb, tp2, inside).compute);
}

TEST(PlanTime, EfficiencyCurveInterpolatesInLogFlops) {
  const DeviceProfile d = flat_device();
  EXPECT_DOUBLE_EQ(d.efficiency(1e3), 0.5);
  EXPECT_DOUBLE_EQ(d.efficiency(1e12), 1.0);
  EXPECT_NEAR(d.efficiency(1e8), 0.75, 1e-12);
}

TEST(PlanTime, GroupsCrossNodesInMegatronsRankOrder) {
  PlanCluster c{4, 8, flat_device()};
  PlanLayout l;
  l.tp = 8, l.pp = 4, l.dp = 1;  // TP fills a node, PP across the 4 nodes
  NodeCrossing x = node_crossing_of(l, c);
  EXPECT_EQ(x.tp, 1);
  EXPECT_EQ(x.pp, 4);
  EXPECT_EQ(x.dp, 1);
  l.tp = 4, l.pp = 2, l.dp = 4;  // ranks tp-dp-pp: a DP group strides 4 over 16 ranks
  x = node_crossing_of(l, c);
  EXPECT_EQ(x.tp, 1);
  EXPECT_EQ(x.dp, 2);
  EXPECT_EQ(x.pp, 2);
  EXPECT_EQ(x.describe(), "TP inside nodes, DP across 2 nodes, PP across 2 nodes");
  l.tp = 16, l.pp = 1, l.dp = 2;  // TP wider than a node
  EXPECT_EQ(node_crossing_of(l, c).tp, 2);
  // tp-cp-dp-pp: TP4 x CP2 fills a node, DP x CP (what gradients use) spans 2
  l.tp = 4, l.cp = 2, l.dp = 2, l.pp = 2;
  x = node_crossing_of(l, c);
  EXPECT_EQ(x.cp, 1);
  EXPECT_EQ(x.dp, 2);
  EXPECT_EQ(x.describe(), "TP inside nodes, CP inside nodes, DP across 2 nodes, PP across 2 nodes");
  l.tp = 1, l.cp = 16, l.dp = 1, l.pp = 2;  // CP wider than a node
  EXPECT_EQ(node_crossing_of(l, c).cp, 2);
}

// node_crossing_of counts one group per residue of its first rank modulo
// devices per node (a plan may have 2^20 ranks): the same as listing every
// group of group_ranks and counting each one's nodes.
TEST(PlanTime, NodeCrossingIsEveryGroupsOwnCount) {
  auto brute = [](GroupKind kind, const PlanLayout& l, const PlanCluster& c) {
    int most = 1;
    for (const std::vector<int>& g :
         group_ranks(kind, int(c.world()), int(l.tp), int(l.pp), int(l.cp))) {
      std::set<int64_t> nodes;
      for (int r : g) nodes.insert(r / c.devices_per_node);
      most = std::max(most, int(nodes.size()));
    }
    return most;
  };
  int checked = 0;
  for (int64_t per_node : {1, 3, 4, 6, 8})
    for (int64_t nodes : {1, 2, 5, 8}) {
      const PlanCluster c{nodes, per_node, flat_device()};
      const int64_t w = c.world();
      for (int64_t tp = 1; tp <= w; ++tp)
        for (int64_t cp = 1; cp <= w / tp; ++cp)
          for (int64_t pp = 1; pp <= w / (tp * cp); ++pp) {
            if (w % (tp * cp * pp) != 0) continue;
            PlanLayout l;
            l.tp = tp, l.cp = cp, l.pp = pp, l.dp = w / (tp * cp * pp);
            const NodeCrossing x = node_crossing_of(l, c);
            const std::string at = l.name() + " on " + std::to_string(nodes) + " x " +
                                   std::to_string(per_node);
            EXPECT_EQ(x.tp, brute(GroupKind::kTp, l, c)) << at;
            EXPECT_EQ(x.pp, brute(GroupKind::kPp, l, c)) << at;
            EXPECT_EQ(x.dp, brute(cp > 1 ? GroupKind::kDpCp : GroupKind::kDp, l, c)) << at;
            EXPECT_EQ(x.cp, cp > 1 ? brute(GroupKind::kCp, l, c) : 0) << at;
            ++checked;
          }
    }
  EXPECT_GT(checked, 500);
}

// 1F1B with unequal stages: the last stage (the logits) runs its m
// micro-batches back to back, the other P − 1 stages' one micro-batch each is
// the fill and drain (÷ v interleaved): less than (P − 1) of the busiest stage.
TEST(PlanTime, BubbleIsTheOtherStagesFillAndDrain) {
  const PlanProblem pb = model(4, 16);
  PlanCluster c{1, 4, flat_device()};
  PlanLayout l;
  l.dp = 4, l.micro_batch_size = 1;
  const double m = 16, m1 = 4;
  const double whole = time_of(pb, l, c).compute / m1;  // all layers + logits, one micro-batch
  l.pp = 4, l.dp = 1;
  const StepTime one = time_of(pb, l, c);
  const double last = one.compute / m;          // a quarter of the layers + logits
  const double first = (whole - last) / 3;      // a quarter of the layers
  ASSERT_GT(last, 1.05 * first);
  EXPECT_NEAR(one.bubble, 3.0 * (first + one.pp_comm / m), 1e-9 * one.bubble);
  EXPECT_LT(one.bubble, 3.0 * (last + one.pp_comm / m));  // Megatron's formula on the busiest
  l.vp = 2;
  const StepTime two = time_of(pb, l, c);
  EXPECT_NEAR(two.bubble, 1.5 * (first + two.pp_comm / m), 1e-9 * two.bubble);
  EXPECT_GT(two.pp_comm, one.pp_comm);  // each chunk sends and receives
  l.pp = 1, l.vp = 1, l.dp = 4;
  EXPECT_EQ(time_of(pb, l, c).bubble, 0);
}

// --mtp-num-layers: each depth is a layer, eh_proj and a loss head more on the
// last stage (2 layers and the head here: between half and all of it again);
// the other stages, and so the fill and drain, are unchanged.
TEST(PlanTime, MtpDepthsAddToTheLastStageOnly) {
  PlanProblem pb = model(4, 16);
  pb.model.position_embedding_type = "rope";
  PlanCluster c{1, 4, flat_device()};
  PlanLayout l;
  l.pp = 4, l.dp = 1, l.micro_batch_size = 1;
  const StepTime base = time_of(pb, l, c);
  pb.model.mtp_num_layers = 1;
  const StepTime with = time_of(pb, l, c);
  EXPECT_GT(with.compute, 1.5 * base.compute);
  EXPECT_LT(with.compute, 2.0 * base.compute);
  EXPECT_NEAR(with.bubble, base.bubble, 1e-9 * base.bubble);
}

// Each collective is priced with its own measured α–β: a slow reduce-scatter
// slows SP's TP traffic, not plain TP's all-reduces nor the DP all-reduce.
TEST(PlanTime, CollectivesUseTheirOwnAlphaBeta) {
  LinkProfile link{1e9, 1e-5};
  EXPECT_DOUBLE_EQ(all_gather_seconds(1e9, 4, link), 0.75 + 3 * 1e-5);
  link.collectives[size_t(Collective::kReduceScatter)] = {1e8, 1e-4};
  link.collectives[size_t(Collective::kAllGather)] = {2e9, 1e-6};
  link.collectives[size_t(Collective::kAllReduce)] = {1e9, 1e-5};
  link.collectives[size_t(Collective::kP2p)] = {4e9, 2e-6};
  EXPECT_DOUBLE_EQ(reduce_scatter_seconds(1e9, 2, link), 5 + 1e-4);
  EXPECT_DOUBLE_EQ(all_gather_seconds(1e9, 2, link), 0.25 + 1e-6);
  EXPECT_DOUBLE_EQ(p2p_seconds(1e9, link), 0.25 + 2e-6);

  const PlanProblem pb = model(2, 8);
  PlanCluster fast{1, 2, flat_device()}, slow_rs = fast;
  slow_rs.device.intra_node.collectives[size_t(Collective::kReduceScatter)] = {1e9, 1e-6};
  for (size_t k : {size_t(Collective::kAllReduce), size_t(Collective::kAllGather),
                   size_t(Collective::kP2p)})
    slow_rs.device.intra_node.collectives[k] = {1e11, 1e-6};
  PlanLayout l;
  l.tp = 2, l.dp = 1, l.sequence_parallel = true;
  const double sp_fast = time_of(pb, l, fast).tp_comm, sp_slow = time_of(pb, l, slow_rs).tp_comm;
  EXPECT_GT(sp_slow, 10 * sp_fast);
  // Per layer and micro-batch: 4 reduce-scatters of s·b·h fp32 (plus the embedding's).
  const double act = 256.0 * 1 * 512 * 4;
  EXPECT_GT(sp_slow, 8 * 4 * 8 * reduce_scatter_seconds(act, 2, slow_rs.device.intra_node));
  l.sequence_parallel = false;
  EXPECT_LT(time_of(pb, l, slow_rs).tp_comm, 2 * time_of(pb, l, fast).tp_comm);
}

// bf16 GEMMs follow their own curve, and the attention core its own rate.
TEST(PlanTime, Bf16CurveAndAttentionRate) {
  const PlanProblem pb = model(1, 4);
  PlanCluster c{1, 1, flat_device()};
  PlanLayout l;
  l.bf16 = true;
  const StepTime base = time_of(pb, l, c);
  PlanCluster half = c;  // bf16 at half the efficiency everywhere: GEMM time doubles
  half.device.gemm_efficiency_bf16 = {{1e6, 0.25}, {1e10, 0.5}};
  const StepTime h = time_of(pb, l, half);
  EXPECT_GT(h.compute, 1.6 * base.compute);
  l.bf16 = false;  // fp32 untouched
  EXPECT_DOUBLE_EQ(time_of(pb, l, half).compute, time_of(pb, l, c).compute);
  // The attention core at 1 GFLOP/s (dropout 0.1, the model's default):
  // 3.5 x 2·b·a·s²·d FLOPs per layer and micro-batch.
  PlanCluster attn = c;
  attn.device.attention = {{256, 1e12, 1e12, 1e9, 1e12}};
  const StepTime a = time_of(pb, l, attn);
  const double core = 3.5 * 2 * 1 * 8 * 256.0 * 256 * 64 / 1e9;
  const double before = time_of(pb, l, c).compute;
  const double gemm_core = 3.5 * 2 * 8 * 256.0 * 256 * 64 / 1e12;  // at most, on the flat device
  EXPECT_GT(a.compute - before, 4 * 8 * (core - 2 * gemm_core));
  EXPECT_LT(a.compute - before, 4 * 8 * core);
}

// More ranks on a node than cores: the node's summed compute over its cores
// bounds the step; with a core per rank nothing changes.
TEST(PlanTime, OversubscribedRanksShareTheNode) {
  const PlanProblem pb = model(4, 16);
  PlanCluster own{1, 4, flat_device()}, shared = own;
  shared.device.cores_per_node = 2;
  PlanLayout l;
  l.dp = 4, l.bf16 = false;
  const StepTime alone = time_of(pb, l, own);
  EXPECT_EQ(alone.shared, 0);
  const StepTime two = time_of(pb, l, shared);
  EXPECT_NEAR(two.total(), 2 * (alone.compute + alone.optimizer) + alone.dp_comm,
              1e-9 * two.total());
  EXPECT_GT(two.shared, 0.9 * alone.compute);
  shared.device.cores_per_node = 4;
  EXPECT_EQ(time_of(pb, l, shared).shared, 0);
  // PP: the first stages' ranks wait part of the time, the node holds whole
  // pipelines: the bound is the stages' mean, less than 2x the busiest.
  shared.device.cores_per_node = 2;
  l.pp = 2, l.dp = 2;
  const StepTime pp_alone = time_of(pb, l, own), pp_two = time_of(pb, l, shared);
  EXPECT_GT(pp_two.total(), pp_alone.total());
  EXPECT_LT(pp_two.total(), 2 * pp_alone.total());
}

TEST(PlanTime, LeversMoveTimeTheWayTheyMust) {
  const PlanProblem pb = model(8, 32);
  PlanCluster inside{1, 8, flat_device()}, split{4, 2, flat_device()};
  PlanLayout l;
  l.tp = 4, l.dp = 2, l.bf16 = false;
  const StepTime base = time_of(pb, l, inside);
  EXPECT_GT(base.tp_comm, 0);
  // The same TP group across nodes (2 devices per node) pays the slow link.
  EXPECT_GT(time_of(pb, l, split).tp_comm, 5 * base.tp_comm);
  // Full recompute: one more forward of the layers (~1/3 of the GEMM time).
  PlanLayout r = l;
  r.recompute = "full";
  const StepTime rc = time_of(pb, r, inside);
  EXPECT_GT(rc.recompute, 0.2 * base.compute);
  EXPECT_NEAR(rc.compute, base.compute + rc.recompute, 1e-9 * rc.compute);
  EXPECT_GT(rc.tp_comm, base.tp_comm);  // the recomputed forward's all-reduces
  // bf16 has twice the peak here: compute shrinks.
  PlanLayout h = l;
  h.bf16 = true;
  EXPECT_LT(time_of(pb, h, inside).compute, 0.6 * base.compute);
  // ZeRO-1: a reduce-scatter of the fp32 gradients and an all-gather of the
  // parameters — in fp32 the bytes of the all-reduce, in bf16 fewer (the
  // gathered weights are bf16); the optimizer step shrinks by DP.
  PlanLayout z = l;
  z.distributed_optimizer = true;
  const StepTime zt = time_of(pb, z, inside);
  EXPECT_NEAR(zt.optimizer, base.optimizer / 2, 1e-12);
  EXPECT_NEAR(zt.dp_comm, base.dp_comm, 1e-12);
  PlanLayout zh = h;
  zh.distributed_optimizer = true;
  EXPECT_LT(time_of(pb, zh, inside).dp_comm, 0.8 * time_of(pb, h, inside).dp_comm);
}

TEST(PlanReport, RanksFittingLayoutsByThroughputAndSaysWhy) {
  const PlanProblem pb = model(8, 32);
  PlanCluster c{2, 4, flat_device()};
  const std::vector<PlanLayout> ls = enumerate_layouts(pb, {});
  const std::vector<PlanResult> rs = evaluate_layouts(pb, ls, c);
  ASSERT_EQ(rs.size(), ls.size());
  for (size_t i = 1; i < rs.size(); ++i)
    if (rs[i].fits) {
      EXPECT_TRUE(rs[i - 1].fits);
      EXPECT_GE(rs[i - 1].tokens_per_s, rs[i].tokens_per_s);
    }
  const PlanResult& best = rs[0];
  EXPECT_NEAR(best.tokens_per_s * best.time.total(), 32.0 * 256, 1e-6);
  EXPECT_GT(best.mfu, 0);
  EXPECT_LT(best.mfu, 1);
  const nlohmann::json j = plan_result_json(best);
  for (const char* k : {"tp", "pp", "vp", "dp", "cp", "micro_batch_size", "num_micro_batches",
                        "sequence_parallel", "recompute", "distributed_optimizer", "sharding",
                        "precision", "memory", "step_time_s", "tokens_per_s", "tflops_per_device",
                        "mfu", "fits"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j.size(), 18u);
  EXPECT_EQ(j.at("memory").size(), 3u);
  EXPECT_DOUBLE_EQ(j.at("memory").at("total_bytes").get<double>(),
                   j.at("memory").at("weight_and_optimizer_bytes").get<double>() +
                       j.at("memory").at("activation_bytes").get<double>());
  // A layout with a pipeline loses to best on the bubble, and says so.
  for (const PlanResult& r : rs)
    if (r.layout.pp == 8 && r.layout.tp == 1 && r.fits) {
      EXPECT_NE(why_faster(best, r).find("pipeline bubble"), std::string::npos)
          << r.layout.name() << ": " << why_faster(best, r);
      break;
    }
  // Nothing fits a tiny device: the reason names the stage and the overflow.
  c.device.memory_bytes = 1e6;
  const std::vector<PlanResult> none = evaluate_layouts(pb, ls, c);
  EXPECT_FALSE(none[0].fits);
  const std::string why = misfit_reason(none[0], c);
  EXPECT_NE(why.find("GB over"), std::string::npos) << why;
  EXPECT_NE(why.find("pipeline stage needs"), std::string::npos) << why;
}

// Selective recompute of the MoE layers (--recompute-modules moe) adds their
// GEMMs' forward to the compute, counted as recompute, and at EP2 a second
// dispatch and combine; full recompute adds more (the whole layers).
TEST(PlanTime, MoeRecomputeAddsTheMoeForward) {
  PlanProblem pb = model(2, 8);
  pb.model.num_experts = 4;
  pb.model.moe_router_topk = 2;
  pb.model.moe_layer_freq = "[0]+[1]*7";
  PlanCluster c{1, 2, flat_device()};
  PlanLayout l;
  l.dp = 2, l.ep = 2, l.micro_batch_size = 1, l.bf16 = false;
  const StepTime keep = time_of(pb, l, c);
  EXPECT_EQ(keep.recompute, 0);
  pb.recompute_modules = {"moe"};
  const StepTime moe = time_of(pb, l, c);
  EXPECT_GT(moe.recompute, 0);
  EXPECT_NEAR(moe.compute - keep.compute, moe.recompute, 1e-12 * moe.compute);
  EXPECT_GT(moe.ep_comm, keep.ep_comm);
  pb.recompute_modules = {"moe", "mlp"};  // the dense first layer's MLP too
  EXPECT_GT(time_of(pb, l, c).recompute, moe.recompute);
  pb.recompute_modules = {};
  l.recompute = "full";
  EXPECT_GT(time_of(pb, l, c).recompute, moe.recompute);
}

// The partial modules add what each block redoes, counted as recompute: the
// experts' activation (moe_act), the shared expert's GEMMs (shared_experts),
// MLA's up-projections (mla_up_proj); under moe, moe_act and shared_experts
// add nothing (the whole MoE layer is redone).
TEST(PlanTime, PartialRecomputeAddsWhatEachBlockRedoes) {
  PlanProblem pb = model(2, 8);
  ModelConfig& m = pb.model;
  m.num_experts = 4, m.moe_router_topk = 2, m.moe_layer_freq = "[0]+[1]*7";
  m.moe_shared_expert_intermediate_size = 64, m.moe_grouped_gemm = true;
  m.disable_bias_linear = true, m.position_embedding_type = "rope";
  m.multi_latent_attention = true, m.q_lora_rank = 16, m.kv_lora_rank = 16;
  m.qk_head_dim = 16, m.qk_pos_emb_head_dim = 8, m.v_head_dim = 16;
  PlanCluster c{1, 2, flat_device()};
  PlanLayout l;
  l.dp = 2, l.ep = 2, l.micro_batch_size = 1, l.bf16 = false;
  const StepTime keep = time_of(pb, l, c);
  EXPECT_EQ(keep.recompute, 0);
  double all = 0;
  for (const char* module : {"moe_act", "shared_experts", "mla_up_proj"}) {
    pb.recompute_modules = {module};
    const StepTime t = time_of(pb, l, c);
    EXPECT_GT(t.recompute, 0) << module;
    EXPECT_NEAR(t.compute - keep.compute, t.recompute, 1e-12 * t.compute) << module;
    all += t.recompute;
  }
  pb.recompute_modules = {"moe_act", "shared_experts", "mla_up_proj"};
  EXPECT_NEAR(time_of(pb, l, c).recompute, all, 1e-9 * all);
  pb.recompute_modules = {"moe"};
  const double moe = time_of(pb, l, c).recompute;
  pb.recompute_modules = {"moe", "moe_act", "shared_experts"};
  EXPECT_DOUBLE_EQ(time_of(pb, l, c).recompute, moe);
}

// MoE: dense gradients are reduced over DP x CP, an EP rank's experts over
// its expert-DP group ((TP x CP x DP) / EP ranks), and the distributed
// optimizer owns its share of each.
TEST(PlanTime, ExpertGradientsGoOverExpertDataParallel) {
  PlanProblem pb = model(4, 16);
  pb.model.num_experts = 4;
  pb.model.moe_router_topk = 2;
  PlanCluster c{1, 4, flat_device()};
  const LinkProfile& link = c.device.intra_node;
  for (const bool zero : {false, true})
    for (const int64_t ep : {1, 2, 4}) {
      PlanLayout l;
      l.dp = 4, l.ep = ep, l.micro_batch_size = 1, l.distributed_optimizer = zero, l.bf16 = false;
      const ParamRegistry reg = stage_registry(pb, l, 0);
      const double expert =
          double(reg.total_floats() - reg.group_begin(GradGroup::kExpertDataParallel));
      const double dense = double(reg.total_floats()) - expert;
      ASSERT_GT(expert, 0);
      auto sync = [&](double floats, int64_t ranks) {
        if (ranks == 1) return 0.0;
        return zero ? reduce_scatter_seconds(floats * 4, ranks, link) +
                          all_gather_seconds(floats * 4, ranks, link)
                    : all_reduce_seconds(floats * 4, ranks, link);
      };
      const StepTime t = time_of(pb, l, c);
      EXPECT_NEAR(t.dp_comm, sync(dense, 4) + sync(expert, 4 / ep), 1e-12) << ep << zero;
      const double owned = zero ? dense / 4 + expert / double(4 / ep) : dense + expert;
      EXPECT_NEAR(t.optimizer, owned * 32 / 1e12, 1e-15) << ep << zero;
    }
}

}  // namespace plan_time_test
}  // namespace mt
