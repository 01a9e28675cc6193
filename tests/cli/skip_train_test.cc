// Megatron's --skip-train: the loaded checkpoint is evaluated on the
// validation and test splits and the run exits, training and saving nothing;
// val_loss/val_ppl and test_loss/test_ppl go to --log-json. Its validation
// loss is the one the training run logged for the same weights, on one rank
// and on two (DP2).
#include <cmath>
#include <filesystem>

#include "cli_test_util.h"

namespace mt::test {
namespace skip_train_test {

class SkipTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    flags_ = prepare_data(dir_, synthetic_corpus(80)) + tiny_model_flags() +
             " --split 80,10,10 --eval-iters 2 --train-iters 8";
    const RunResult r = run(megatron() + " train" + flags_ + " --eval-interval 4 --save " +
                            dir_.file("ckpt") + " --log-json " + dir_.file("train.json"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    trained_ = read_log_json(dir_.file("train.json"));
    ASSERT_FALSE(trained_.eval.empty());
  }
  // The --log-json lines of a --skip-train run launched by `launcher`.
  std::vector<nlohmann::json> skip_train(const std::string& launcher, const std::string& tag) {
    const std::string json = dir_.file(tag + ".json");
    const RunResult r = run(launcher + " train" + flags_ + " --skip-train --load " +
                            dir_.file("ckpt") + " --log-json " + json);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("done: --skip-train evaluated the checkpoint of iteration 8"),
              std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("iteration        9/"), std::string::npos) << "trained\n" << r.output;
    std::vector<nlohmann::json> lines;
    std::istringstream in(read_text(json));
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
    return lines;
  }
  void expect_evaluated(const std::vector<nlohmann::json>& lines, const std::string& tag) {
    ASSERT_EQ(lines.size(), 2u) << tag;  // validation, test; no training line
    const nlohmann::json& val = lines[0];
    const nlohmann::json& test = lines[1];
    EXPECT_EQ(val.at("iteration"), 8) << tag;
    EXPECT_EQ(test.at("iteration"), 8) << tag;
    // The last evaluation of the training run saw the same weights and batches.
    const double logged = trained_.eval.back().at("val_loss").get<double>();
    ASSERT_EQ(trained_.eval.back().at("iteration"), 8);
    EXPECT_NEAR(val.at("val_loss").get<double>(), logged, 1e-6 * logged) << tag;
    EXPECT_NEAR(val.at("val_ppl").get<double>(), std::exp(logged), 1e-5 * std::exp(logged));
    const double test_loss = test.at("test_loss").get<double>();
    EXPECT_TRUE(std::isfinite(test_loss) && test_loss > 0) << test.dump();
    EXPECT_NE(test_loss, val.at("val_loss").get<double>()) << "another split, another loss";
    EXPECT_NEAR(test.at("test_ppl").get<double>(), std::exp(test_loss), 1e-5 * std::exp(test_loss));
  }
  TempDir dir_;
  std::string flags_;
  JsonLogLines trained_;
};

TEST_F(SkipTrain, EvaluatesTheCheckpointOnValidationAndTestAndExits) {
  expect_evaluated(skip_train(megatron(), "one_rank"), "one rank");
  // Nothing saved, nothing trained: the checkpoint directory is as it was.
  EXPECT_EQ(read_text(dir_.file("ckpt/latest_checkpointed_iteration.txt")), "8\n");
}

TEST_F(SkipTrain, TwoDataParallelRanksGiveTheSameLosses) {
  expect_evaluated(skip_train(mpirun(2), "dp2"), "DP2");
}

TEST_F(SkipTrain, WithoutACheckpointItSaysWhatToLoad) {
  const RunResult r = run(megatron() + " train" + flags_ + " --skip-train");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--skip-train evaluates a checkpoint, and no --load was given"),
            std::string::npos) << r.output;
}

}  // namespace skip_train_test
}  // namespace mt::test
