// megatron plan's step-time model: ring α–β costs, which groups cross nodes
// (tp-dp-pp rank order), the bubble (P − 1)/(v·m) of the compute, the levers
// moving time the way they must, and the ranking with its reasons.
#include "train/plan_time.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "train/plan_report.h"

namespace mt {
namespace {

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
  return predict_step_time(m, pb, l, c, node_crossing_of(l, c), layout_params_local(pb, l, 0),
                           layout_params_local(pb, l, l.pp - 1));
}

TEST(PlanTime, RingCosts) {
  const LinkProfile link{1e9, 1e-5};
  EXPECT_DOUBLE_EQ(all_reduce_seconds(1e9, 1, link), 0);
  EXPECT_DOUBLE_EQ(all_reduce_seconds(1e9, 4, link), 2 * 0.75 + 6 * 1e-5);
  EXPECT_DOUBLE_EQ(reduce_scatter_seconds(1e9, 4, link), 0.75 + 3 * 1e-5);
  EXPECT_DOUBLE_EQ(p2p_seconds(1e9, link), 1 + 1e-5);
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
}

TEST(PlanTime, BubbleIsPMinusOneOverVmOfTheMicroBatchTime) {
  const PlanProblem pb = model(4, 16);
  PlanCluster c{1, 4, flat_device()};
  PlanLayout l;
  l.pp = 4, l.dp = 1, l.micro_batch_size = 1;
  const StepTime one = time_of(pb, l, c);
  const double m = 16;
  const double per_mb = (one.compute + one.pp_comm) / m;
  EXPECT_NEAR(one.bubble, 3.0 * per_mb, 1e-12 * one.bubble);
  l.vp = 2;
  const StepTime two = time_of(pb, l, c);
  EXPECT_NEAR(two.bubble, 1.5 * (two.compute + two.pp_comm) / m, 1e-12 * two.bubble);
  EXPECT_LT(two.bubble, one.bubble);
  EXPECT_GT(two.pp_comm, one.pp_comm);  // each chunk sends and receives
  l.pp = 1, l.vp = 1, l.dp = 4;
  EXPECT_EQ(time_of(pb, l, c).bubble, 0);
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
                        "sequence_parallel", "recompute", "distributed_optimizer", "precision",
                        "memory", "step_time_s", "tokens_per_s", "tflops_per_device", "mfu", "fits"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j.size(), 17u);
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

}  // namespace
}  // namespace mt
