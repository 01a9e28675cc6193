// megatron::plan() (include/megatron/plan.h) from C++ without flag words: a
// small model on 8 ranks gives layouts whose sizes multiply to 8, ranked by
// step time, each one's memory and step time what `megatron plan --json`
// reports for it; pins hold; a refused input is a ConfigError without the
// source's file:line. megatron::Planner's words: --help a FlagHelp with
// plan's usage, a misspelt flag a FlagError naming it, the flags as the
// public structs.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/mpi_env.h"
#include "megatron/plan.h"

namespace plan_test {

megatron::ModelConfig small_model() {
  megatron::ModelConfig m;
  m.num_layers = 4;
  m.hidden_size = 64;
  m.num_attention_heads = 4;
  m.seq_length = 128;
  m.vocab_size = 1000;
  return m;
}

megatron::Cluster eight_ranks() {
  megatron::Cluster c;
  c.devices_per_node = 8;
  c.device = "a100-80gb";
  return c;
}

megatron::PlanOptions batch16() {
  megatron::PlanOptions o;
  o.global_batch_size = 16;
  return o;
}

// stdout of `command`.
std::string output_of(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(command.c_str(), "r"), pclose);
  std::string out;
  char buf[4096];
  for (size_t n; p && (n = std::fread(buf, 1, sizeof buf, p.get())) > 0;) out.append(buf, n);
  return out;
}

TEST(Plan, ASmallModelOnEightRanksRankedByStepTimeAsPlanJsonSaysIt) {
  const std::vector<megatron::LayoutPlan> plans = megatron::plan(small_model(), eight_ranks(),
                                                                 batch16());
  ASSERT_GT(plans.size(), 4u);
  for (size_t i = 0; i < plans.size(); ++i) {
    const megatron::Layout& l = plans[i].layout;
    EXPECT_EQ(l.tp * l.pp * l.dp * l.cp, 8) << l.name();
    EXPECT_TRUE(plans[i].fits) << l.name() << ": " << plans[i].misfit;
    EXPECT_GT(plans[i].memory.total_bytes, 0) << l.name();
    // tokens/s is the global batch's tokens over the step: fastest first.
    if (i > 0) {
      EXPECT_LE(plans[i - 1].step_time_s, plans[i].step_time_s * (1 + 1e-12)) << i;
    }
  }
  // The binary, run by one rank (the test also runs under mpirun -n 2).
  if (mt::world_rank_or_zero() != 0) return;
  ASSERT_TRUE(std::filesystem::exists(MT_BINARY)) << MT_BINARY << " is not built";
  const std::string json =
      output_of(std::string(MT_BINARY) +
                " plan --num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 128"
                " --vocab-size 1000 --devices-per-node 8 --device a100-80gb"
                " --global-batch-size 16 --json --top 0");
  std::vector<nlohmann::json> lines;
  for (size_t at = 0, end; (end = json.find('\n', at)) != std::string::npos; at = end + 1)
    lines.push_back(nlohmann::json::parse(json.substr(at, end - at)));
  ASSERT_EQ(lines.size(), plans.size()) << json;
  for (size_t i = 0; i < plans.size(); ++i) {
    const megatron::LayoutPlan& p = plans[i];
    const nlohmann::json& j = lines[i];
    EXPECT_EQ(j["tp"], p.layout.tp);
    EXPECT_EQ(j["pp"], p.layout.pp);
    EXPECT_EQ(j["dp"], p.layout.dp);
    EXPECT_EQ(j["micro_batch_size"], p.layout.micro_batch_size);
    EXPECT_EQ(j["num_micro_batches"], p.num_micro_batches);
    EXPECT_EQ(j["precision"], p.layout.bf16 ? "bf16" : "fp32");
    EXPECT_EQ(j["recompute"], p.layout.recompute);
    EXPECT_DOUBLE_EQ(j["memory"]["total_bytes"].get<double>(), p.memory.total_bytes) << i;
    EXPECT_DOUBLE_EQ(j["memory"]["activation_bytes"].get<double>(), p.memory.activation_bytes);
    EXPECT_DOUBLE_EQ(j["memory"]["weight_and_optimizer_bytes"].get<double>(),
                     p.memory.weight_and_optimizer_bytes);
    EXPECT_DOUBLE_EQ(j["step_time_s"].get<double>(), p.step_time_s) << i;
  }
}

TEST(Plan, PinsHoldAndALayoutTooBigSaysWhy) {
  megatron::PlanOptions o = batch16();
  o.tp = 2;
  o.sequence_parallel = true;
  o.bf16 = false;
  const std::vector<megatron::LayoutPlan> plans = megatron::plan(small_model(), eight_ranks(), o);
  ASSERT_FALSE(plans.empty());
  for (const megatron::LayoutPlan& p : plans) {
    EXPECT_EQ(p.layout.tp, 2);
    EXPECT_TRUE(p.layout.sequence_parallel);
    EXPECT_FALSE(p.layout.bf16);
    EXPECT_NE(p.layout.name().find("TP2 "), std::string::npos) << p.layout.name();
  }
  megatron::Cluster tiny = eight_ranks();
  tiny.device_memory_gb = 0.001;  // 1 MB: nothing fits
  const std::vector<megatron::LayoutPlan> none = megatron::plan(small_model(), tiny, batch16());
  ASSERT_FALSE(none.empty());
  EXPECT_FALSE(none[0].fits);
  EXPECT_FALSE(none[0].misfit.empty());
  EXPECT_GT(none[0].memory.total_bytes, 1e6);
}

TEST(Plan, RefusedInputIsAConfigErrorNamingTheFlag) {
  megatron::PlanOptions o = batch16();
  o.global_batch_size = 0;
  try {
    megatron::plan(small_model(), eight_ranks(), o);
    FAIL() << "a global batch of 0 was planned";
  } catch (const megatron::ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--global-batch-size 0 must be > 0", 0), 0u) << e.what();
  }
  o = batch16();
  o.tp = 3;  // 4 heads, 8 ranks
  EXPECT_THROW(megatron::plan(small_model(), eight_ranks(), o), megatron::ConfigError);
}

TEST(Planner, HelpIsAFlagHelpWithThePlanUsage) {
  try {
    megatron::Planner p({"--help"});
    FAIL() << "--help did not throw";
  } catch (const megatron::FlagHelp& h) {
    const std::string usage = h.what();
    EXPECT_EQ(usage.rfind("memory and step time of every TP/PP/DP layout of a model on a cluster "
                          "(no ranks)\nUsage: plan [OPTIONS]\n", 0), 0u) << usage;
    EXPECT_NE(usage.find("--global-batch-size"), std::string::npos);
  }
}

TEST(Planner, AnUnknownFlagIsAFlagErrorAndTheFlagsAreThePublicStructs) {
  try {
    megatron::Planner p({"--device", "a100-80gb", "--global-batch-sise", "8"});
    FAIL() << "--global-batch-sise did not throw";
  } catch (const megatron::FlagHelp& h) {
    FAIL() << "a FlagHelp: " << h.what();
  } catch (const megatron::FlagError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown flag --global-batch-sise"), std::string::npos)
        << e.what();
  }
  const megatron::Planner p({"--num-layers", "6", "--swiglu", "--vocab-size", "500",
                             "--num-nodes", "2", "--device", "h100-80gb",
                             "--tensor-model-parallel-size", "2", "--fp32",
                             "--global-batch-size", "32"});
  EXPECT_EQ(p.model().num_layers, 6);
  EXPECT_TRUE(p.model().swiglu);
  EXPECT_EQ(p.model().vocab_size, 500);
  EXPECT_EQ(p.cluster().nodes, 2);
  EXPECT_EQ(p.cluster().device, "h100-80gb");
  EXPECT_EQ(p.options().tp, 2);
  EXPECT_EQ(p.options().global_batch_size, 32);
  EXPECT_EQ(p.options().bf16, std::optional<bool>(false));
  EXPECT_FALSE(p.options().sequence_parallel.has_value());
}

}  // namespace plan_test
