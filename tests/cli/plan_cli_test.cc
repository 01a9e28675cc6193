// `megatron plan` end to end: its memory for a layout is what `megatron train
// --log-memory` predicts for the same layout (the one memory model, every
// rank's record), --json has the issue's fields, best first, and bad input —
// a layout that cannot divide, a model that fits nowhere, a malformed device
// file — ends with one line naming the constraint and the numbers.
#include <algorithm>
#include <regex>

#include "cli_test_util.h"

namespace mt::test {
namespace plan_cli_test {

const std::string kModel =
    " --num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 64";

// An MoE model of kModel's sizes whose first layer is dense, its experts over EP2.
const std::string kMoe = " --num-experts 4 --moe-router-topk 2 --moe-layer-freq '[0]+[1]*3'"
                         " --expert-model-parallel-size 2";

std::string devices() { return std::string(MT_SOURCE_DIR) + "/configs/devices"; }

std::string plan() {
  return "env MEGATRON_DEVICES_DIR=" + devices() + " " + megatron() + " plan";
}

std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> v;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] == '{') v.push_back(nlohmann::json::parse(line));
  return v;
}

// Runs train on 2 ranks with `layout` and --log-memory; returns the most
// loaded rank's predicted (weights + grads + optimizer, total) and the true
// vocabulary train used.
struct TrainMemory {
  double weight_and_optimizer = 0, total = 0;
  int64_t vocab = 0;
};

TrainMemory train_memory(const TempDir& dir, const std::string& data, const std::string& layout) {
  const std::string log = dir.file("mem.json");
  std::filesystem::remove(log);
  const RunResult r = run(mpirun(2) + " train" + data + kModel +
                          " --micro-batch-size 2 --global-batch-size 8 --train-iters 1"
                          " --lr 1e-4 --split 90,10,0 --eval-interval 0 --peak-tflops 1"
                          " --log-memory --log-json " + log + layout);
  EXPECT_EQ(r.exit_code, 0) << layout << "\n" << r.output;
  TrainMemory m;
  std::smatch v;
  EXPECT_TRUE(std::regex_search(r.output, v, std::regex("vocab ([0-9]+) \\(padded"))) << r.output;
  if (!v.empty()) m.vocab = std::stoll(v[1]);
  const JsonLogLines lines = read_log_json(log);
  EXPECT_EQ(lines.memory_by_rank.size(), 2u) << layout;
  for (const auto& [rank, j] : lines.memory_by_rank) {
    auto p = [&](const char* c) { return j.at(c).at("predicted_bytes").get<double>(); };
    if (p("total") > m.total) {
      m.total = p("total");
      m.weight_and_optimizer = p("params") + p("grads") + p("optimizer");
    }
  }
  return m;
}

TEST(PlanCli, MemoryIsWhatTrainPredictsForTheSameLayout) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(40));
  struct Case {
    std::string train_flags, plan_pins;
    int64_t tp, pp;
    bool sp, zero, bf16;
    std::string recompute;
    std::string sharding = "";  // Megatron-FSDP's strategy ("": by zero, optim or no_shard)
  };
  const Case cases[] = {
      {" --tensor-model-parallel-size 2 --sequence-parallel", "", 2, 1, true, false, false,
       "selective"},
      {" --pipeline-model-parallel-size 2 --bf16", "", 1, 2, false, false, true, "selective"},
      {" --use-distributed-optimizer --bf16 --recompute-granularity full --recompute-method "
       "uniform --recompute-num-layers 1",
       "", 1, 1, false, true, true, "full"},
      // Context parallelism (pinned: plan tries CP only when asked): s/CP
      // rows per rank, the ring's buffers, ZeRO shards over DP x CP.
      {" --context-parallel-size 2", " --context-parallel-size 2", 1, 1, false, false, false,
       "selective"},
      {" --context-parallel-size 2 --bf16 --use-distributed-optimizer",
       " --context-parallel-size 2", 1, 1, false, true, true, "selective"},
      // Megatron-FSDP: the gradients' staging pool and shard; with ZeRO-3 the weights' too.
      {" --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads",
       " --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads", 1, 1, false, true,
       false, "selective", "optim_grads"},
      {" --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params --bf16",
       " --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params", 1, 1, false,
       true, true, "selective", "optim_grads_params"},
      // Selective recompute of the MoE layers (and of the dense first layer's MLP).
      {kMoe + " --moe-layer-recompute", kMoe + " --moe-layer-recompute", 1, 1, false, false,
       false, "selective"},
      {kMoe + " --recompute-granularity selective --recompute-modules mlp moe",
       kMoe + " --recompute-granularity selective --recompute-modules mlp moe", 1, 1, false,
       false, false, "selective"},
  };
  for (const Case& c : cases) {
    const TrainMemory t = train_memory(dir, data, c.train_flags);
    ASSERT_GT(t.vocab, 0);
    const RunResult r =
        run(plan() + kModel + " --vocab-size " + std::to_string(t.vocab) +
            " --global-batch-size 8 --micro-batch-size 2 --num-nodes 1 --devices-per-node 2"
            " --device a100-80gb --json --top 0 --tensor-model-parallel-size " +
            std::to_string(c.tp) + " --pipeline-model-parallel-size " + std::to_string(c.pp) +
            c.plan_pins);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    bool found = false;
    for (const nlohmann::json& j : json_lines(r.output)) {
      if (j.at("sequence_parallel") != c.sp || j.at("distributed_optimizer") != c.zero ||
          j.at("sharding") != (!c.sharding.empty() ? c.sharding : c.zero ? "optim" : "no_shard") ||
          j.at("precision") != (c.bf16 ? "bf16" : "fp32") || j.at("recompute") != c.recompute ||
          j.at("vp") != 1 || (j.at("cp") == 2) != (c.plan_pins.find("context") != std::string::npos))
        continue;
      found = true;
      EXPECT_EQ(j.at("memory").at("total_bytes").get<double>(), t.total) << c.train_flags;
      EXPECT_EQ(j.at("memory").at("weight_and_optimizer_bytes").get<double>(),
                t.weight_and_optimizer)
          << c.train_flags;
    }
    EXPECT_TRUE(found) << c.train_flags << "\n" << r.output;
  }
}

TEST(PlanCli, JsonLinesBestFirstWithTheIssuesFields) {
  const RunResult r = run(plan() + kModel + " --vocab-size 1000 --global-batch-size 16"
                          " --num-nodes 2 --devices-per-node 4 --device h100-80gb --json --top 5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<nlohmann::json> lines = json_lines(r.output);
  ASSERT_EQ(lines.size(), 5u) << r.output;
  for (size_t i = 0; i < lines.size(); ++i) {
    const nlohmann::json& j = lines[i];
    EXPECT_EQ(j.size(), 18u) << j.dump();
    EXPECT_TRUE(j.at("fits").get<bool>());
    EXPECT_EQ(j.at("tp").get<int64_t>() * j.at("pp").get<int64_t>() * j.at("dp").get<int64_t>() *
                  j.at("cp").get<int64_t>(),
              8);
    EXPECT_EQ(j.at("micro_batch_size").get<int64_t>() * j.at("num_micro_batches").get<int64_t>() *
                  j.at("dp").get<int64_t>(),
              16);
    EXPECT_NEAR(j.at("tokens_per_s").get<double>() * j.at("step_time_s").get<double>(), 16 * 64,
                1e-6);
    if (i > 0) {
      EXPECT_LE(j.at("tokens_per_s").get<double>(), lines[i - 1].at("tokens_per_s").get<double>());
    }
  }
  // The table names the best layout, its stages' memory and where its groups sit.
  const RunResult t = run(plan() + kModel + " --vocab-size 1000 --global-batch-size 16"
                          " --num-nodes 2 --devices-per-node 4 --device h100-80gb --top 3");
  ASSERT_EQ(t.exit_code, 0) << t.output;
  EXPECT_NE(t.output.find("best: "), std::string::npos) << t.output;
  EXPECT_NE(t.output.find("first stage: params"), std::string::npos) << t.output;
  EXPECT_NE(t.output.find("TP inside nodes"), std::string::npos) << t.output;
  EXPECT_NE(t.output.find("#1 beats #2"), std::string::npos) << t.output;
}

TEST(PlanCli, BadInputNamesTheConstraint) {
  const std::string base = plan() + kModel + " --vocab-size 1000 --global-batch-size 16";
  // 8 heads over TP 3 (6 ranks): train's own message.
  RunResult r = run(base + " --num-nodes 1 --devices-per-node 6 --device a100-80gb"
                           " --tensor-model-parallel-size 3");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--num-attention-heads 8 is not divisible by TP 3"), std::string::npos)
      << r.output;
  // PP 3 of 8 ranks.
  r = run(base + " --num-nodes 1 --devices-per-node 8 --device a100-80gb"
                 " --pipeline-model-parallel-size 3");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("world size 8 is not divisible by TP 1 x PP 3"), std::string::npos)
      << r.output;
  // A model that fits nowhere: the overflow in GB.
  r = run(plan() + " --num-layers 8 --hidden-size 8192 --num-attention-heads 64 --seq-length 2048"
                   " --vocab-size 50000 --global-batch-size 8 --num-nodes 1 --devices-per-node 1"
                   " --device a100-80gb");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("no layout fits in"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("GB over"), std::string::npos) << r.output;
  // A device file with a typo in a field.
  TempDir dir;
  std::ifstream in(devices() + "/a100-80gb.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j["peak_flops"]["bf16"] = 0;
  write_text(dir.file("dev.json"), j.dump());
  r = run(base + " --device " + dir.file("dev.json"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("'bf16' is 0"), std::string::npos) << r.output;
  r = run(base + " --device tpu-v9");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("a100-80gb"), std::string::npos) << r.output;
}

// Absurd clusters end at once with one line naming the values and the limit
// (65536 x 65536 ran ~115 s into SIGFPE; 2 x 2^30 printed "DP -1073741824"),
// exit 1 as plan's other refusals; the limit itself (2^20 ranks) is planned.
// `timeout 30`: a hang fails as exit 124.
TEST(PlanCli, AbsurdClustersAreRefusedInOneLine) {
  const std::string base = "timeout 30 " + plan() + kModel + " --vocab-size 1000 --device a100-80gb";
  struct Case {
    std::string flags, names;
  };
  const Case cases[] = {
      {" --global-batch-size 16 --num-nodes 65536 --devices-per-node 65536",
       "--num-nodes 65536 x --devices-per-node 65536 = 4294967296 ranks is more than plan's "
       "limit of 1048576"},
      {" --global-batch-size 16 --num-nodes 2 --devices-per-node 1073741824",
       "--num-nodes 2 x --devices-per-node 1073741824 = 2147483648 ranks is more than plan's "
       "limit of 1048576"},
      {" --global-batch-size 16 --num-nodes 1099511627776 --devices-per-node 1099511627776",
       "1099511627776 x 1099511627776 overflows 64-bit integers"},
      {" --global-batch-size 16 --num-nodes 1 --devices-per-node 8"
       " --tensor-model-parallel-size 1099511627776",
       "--tensor-model-parallel-size 1099511627776 is more than the cluster's 8 ranks"},
  };
  for (const Case& c : cases) {
    const RunResult r = run(base + c.flags);
    EXPECT_EQ(r.exit_code, 1) << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find(c.names), std::string::npos) << c.flags << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << c.flags << "\n"
                                                                       << r.output;
    EXPECT_EQ(r.output.find("DP -"), std::string::npos) << r.output;
  }
  // 1024 x 1024 = 2^20 ranks, the limit: planned (DP 2^20 / (TP x PP)).
  const RunResult r = run(base + " --global-batch-size 2097152 --num-nodes 1024"
                                 " --devices-per-node 1024 --json --top 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(json_lines(r.output).size(), 1u) << r.output;
  EXPECT_EQ(json_lines(r.output)[0].at("tp").get<int64_t>() *
                json_lines(r.output)[0].at("pp").get<int64_t>() *
                json_lines(r.output)[0].at("dp").get<int64_t>(),
            1048576);
}

// --calibrate on 2 ranks writes a profile that passes the strict reader (plan
// runs with it), with measured peaks, curves, attention rates, collectives,
// cores and this host's memory share. (--calibrate-quick: the same code and
// fields from smaller measurements; the full one took ~65 s on 2 busy cores.)
TEST(PlanCli, CalibrateWritesAProfilePlanRunsWith) {
  TempDir dir;
  const std::string out = dir.file("cpu.json");
  const RunResult c = run(mpirun(2) + " plan --calibrate --calibrate-quick --output " + out);
  ASSERT_EQ(c.exit_code, 0) << c.output;
  std::ifstream in(out);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("name"), "cpu-here");
  EXPECT_GT(j.at("peak_flops").at("fp32").get<double>(), 1e9);  // > 1 GFLOP/s per rank
  EXPECT_GT(j.at("peak_flops").at("bf16").get<double>(), 1e9);
  EXPECT_GT(j.at("memory_bytes").get<double>(), 1e8);
  EXPECT_EQ(j.at("gemm_efficiency").size(), 5u);
  EXPECT_GT(j.at("links").at("intra_node").at("bandwidth_bytes_per_s").get<double>(), 1e6);
  EXPECT_NE(j.at("sources").dump().find("2 rank(s)"), std::string::npos) << j.dump();
  // Its own bf16 curve, the attention core at 3 lengths, the host's cores
  // and each collective's measured α–β (the strict reader accepted them).
  EXPECT_EQ(j.at("gemm_efficiency_bf16").size(), 5u);
  ASSERT_EQ(j.at("attention_flops_per_s").size(), 3u);
  EXPECT_GT(j.at("attention_flops_per_s")[1].at("bf16").get<double>(), 1e8);
  EXPECT_GE(j.at("cores_per_node").get<int64_t>(), 1);
  for (const char* k : {"all_reduce", "reduce_scatter", "all_gather", "p2p"})
    EXPECT_GT(j.at("links").at("intra_node").at("collectives").at(k).at("bandwidth_bytes_per_s")
                  .get<double>(), 1e6) << k;
  const RunResult r = run(plan() + kModel + " --vocab-size 1000 --global-batch-size 8"
                          " --num-nodes 1 --devices-per-node 2 --device " + out + " --json --top 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(json_lines(r.output).size(), 1u) << r.output;
  EXPECT_GT(json_lines(r.output)[0].at("tokens_per_s").get<double>(), 0);
}

}  // namespace plan_cli_test
}  // namespace mt::test
