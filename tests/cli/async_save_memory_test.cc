// --async-save's host copy in the memory plan: --log-memory prints its line
// (predicted and the bytes the writer's copy actually holds), `megatron plan
// --async-save` counts the same bytes for the same layout, and without
// --async-save there is no such line.
#include <regex>

#include "cli_test_util.h"

namespace mt::test {
namespace async_save_memory_test {

const std::string kModel =
    " --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32";

double pred(const nlohmann::json& m, const char* c) {
  return m.at(c).at("predicted_bytes").get<double>();
}
double meas(const nlohmann::json& m, const char* c) {
  return m.at(c).at("measured_bytes").get<double>();
}

class AsyncSaveMemory : public ::testing::Test {
 protected:
  TempDir dir;
  std::string data;
  void SetUp() override { data = prepare_data(dir, synthetic_corpus(40)); }
  // One iteration with --log-memory; every rank's memory record; `out` the output.
  std::map<int, nlohmann::json> memory(const std::string& launch, const std::string& extra,
                                       std::string* out = nullptr) {
    const std::string log = dir.file("mem.json");
    std::filesystem::remove(log);
    std::filesystem::remove_all(dir.file("ckpt"));
    const RunResult r = run(launch + " train" + data + kModel +
                            " --micro-batch-size 2 --global-batch-size 8 --train-iters 2"
                            " --save-interval 1 --lr 1e-4 --split 90,10,0 --eval-interval 0"
                            " --peak-tflops 1 --log-memory --save " +
                            dir.file("ckpt") + " --log-json " + log + extra);
    EXPECT_EQ(r.exit_code, 0) << extra << "\n" << r.output;
    if (out) *out = r.output;
    return read_log_json(log).memory_by_rank;
  }
};

TEST_F(AsyncSaveMemory, TheLineIsTheCopysBytes) {
  std::string out;
  const nlohmann::json m = memory(megatron(), " --async-save", &out).at(0);
  EXPECT_NE(out.find("  async save copy "), std::string::npos) << out;
  EXPECT_NE(out.find(" | async save copy "), std::string::npos) << out;  // the start-up plan line
  // fp32, one rank: the copy is the weights (4 bytes each) and m, v (8).
  EXPECT_GT(pred(m, "async_save"), 0);
  EXPECT_EQ(pred(m, "async_save"), meas(m, "async_save"));
  EXPECT_EQ(pred(m, "async_save"), pred(m, "params") + pred(m, "optimizer"));
  EXPECT_EQ(pred(m, "total"), pred(m, "params") + pred(m, "grads") + pred(m, "optimizer") +
                                  pred(m, "activations") + pred(m, "workspace") +
                                  pred(m, "async_save"));
  // --no-save-optim: the weights only.
  const nlohmann::json w = memory(megatron(), " --async-save --no-save-optim").at(0);
  EXPECT_EQ(pred(w, "async_save"), pred(w, "params"));
  EXPECT_EQ(meas(w, "async_save"), pred(w, "params"));
  // A synchronous save keeps no copy: no line.
  const nlohmann::json s = memory(megatron(), "", &out).at(0);
  EXPECT_FALSE(s.contains("async_save")) << s.dump();
  EXPECT_EQ(out.find("async save copy"), std::string::npos) << out;
}

// bf16 with the distributed optimizer on 2 ranks: each rank copies all its
// bf16 weights and its shard of main weights, m and v (12 bytes / 2); the
// shard's padding is the only difference from the plan.
TEST_F(AsyncSaveMemory, ShardedBf16OnTwoRanksAndPlanAgrees) {
  std::string out;
  const auto ranks = memory(mpirun(2), " --bf16 --use-distributed-optimizer --async-save", &out);
  ASSERT_EQ(ranks.size(), 2u);
  for (const auto& [rank, m] : ranks) {
    EXPECT_NEAR(meas(m, "async_save") / pred(m, "async_save"), 1.0, 0.01) << rank;
    EXPECT_EQ(pred(m, "async_save"), pred(m, "params") + pred(m, "optimizer")) << rank;
  }
  std::smatch v;
  ASSERT_TRUE(std::regex_search(out, v, std::regex("vocab ([0-9]+) \\(padded"))) << out;
  const RunResult r =
      run("env MEGATRON_DEVICES_DIR=" + std::string(MT_SOURCE_DIR) + "/configs/devices " +
          megatron() + " plan" + kModel + " --vocab-size " + std::string(v[1]) +
          " --global-batch-size 8 --micro-batch-size 2"
          " --num-nodes 1 --devices-per-node 2 --device a100-80gb --json --top 0"
          " --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1"
          " --use-distributed-optimizer --bf16 --async-save");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  bool found = false;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != '{') continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.at("sharding") != "optim" || j.at("recompute") != "selective" || j.at("vp") != 1)
      continue;
    found = true;
    EXPECT_EQ(j.at("memory").at("async_save_bytes").get<double>(), pred(ranks.at(0), "async_save"));
    EXPECT_EQ(j.at("memory").at("total_bytes").get<double>(), pred(ranks.at(0), "total"));
  }
  EXPECT_TRUE(found) << r.output;
}

}  // namespace async_save_memory_test
}  // namespace mt::test
