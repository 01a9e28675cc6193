// --rerun-mode (train/rerun_check.h): validate_results re-runs the iteration
// whose loss is not finite once, finds it reproduced (the CPU path gives the
// same bits), saves the last completed iteration and exits with Megatron's
// EXIT_CODE_FAILED_ON_RESULT_VALIDATION (17) and messages, on one rank and
// on two; report_stats re-runs every iteration and logs Megatron's stats with
// no difference, the losses unchanged.
#include "cli_test_util.h"

namespace mt::test {
namespace rerun_mode_test {

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

class RerunMode : public ::testing::Test {
 protected:
  TempDir dir;
  std::string data;
  void SetUp() override { data = prepare_data(dir, synthetic_corpus(60)); }
  std::string flags() const {
    return " train" + data + tiny_model_flags() + " --eval-interval 0 --lr-warmup-iters 1";
  }
};

// --lr 1e30 without clipping: iterations 1 (learning rate 0 in the warm-up)
// and 2 are finite, 2's update blows the weights up, and iteration 3's loss
// is not finite.
const char kBlowUp[] = " --train-iters 4 --lr 1e30 --clip-grad 0 --lr-warmup-iters 1";

void expect_validated_exit(const RunResult& r, const std::string& ckpt) {
  EXPECT_EQ(r.exit_code, 17) << r.output;
  const bool nan = r.output.find("message='found NaN in local forward loss") != std::string::npos;
  const bool inf = r.output.find("message='found Inf in local forward loss") != std::string::npos;
  EXPECT_TRUE(nan || inf) << r.output;
  EXPECT_NE(r.output.find("Unexpected result "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" at iteration #3 invocation #1 "), std::string::npos) << r.output;
  EXPECT_EQ(count(r.output, "Need to rerun step to check reproducibility of initial result"), 1u)
      << r.output;
  EXPECT_NE(r.output.find("iteration #3: First rerun: unexpected result is reproducible within "
                          "the tolerance"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("Correct result (but possible Application error) (found "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("Exiting now. A checkpoint at the last iteration already exists if "
                          "further examination is needed"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("is not finite"), std::string::npos) << "the disabled mode's stop";
  EXPECT_NE(r.output.find("iteration        2/"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("iteration        3/"), std::string::npos) << "no update after it";
  EXPECT_EQ(read_text(ckpt + "/latest_checkpointed_iteration.txt"), "2\n");
}

TEST_F(RerunMode, ValidateResultsRerunsANanOnceAndExitsWithMegatronsCode) {
  const std::string ckpt = dir.file("ckpt");
  const RunResult r =
      run(megatron() + flags() + kBlowUp + " --rerun-mode validate_results --save " + ckpt);
  expect_validated_exit(r, ckpt);
  // Without it (disabled, this build's default) the same run stops as before.
  const RunResult d = run(megatron() + flags() + kBlowUp);
  EXPECT_NE(d.exit_code, 0);
  EXPECT_NE(d.exit_code, 17);
  EXPECT_NE(d.output.find("is not finite"), std::string::npos) << d.output;
}

TEST_F(RerunMode, ValidateResultsOnTwoRanksEveryRankExits) {
  const std::string ckpt = dir.file("ckpt");
  const RunResult r = run(mpirun(2) + flags() + kBlowUp +
                          " --use-distributed-optimizer"
                          " --rerun-mode validate_results --save " +
                          ckpt);
  expect_validated_exit(r, ckpt);
}

TEST_F(RerunMode, ReportStatsLogsNoDifferenceAndLeavesTheLossesAlone) {
  const std::string ref = dir.file("ref.json"), got = dir.file("got.json");
  ASSERT_EQ(run(megatron() + flags() + " --train-iters 4 --log-json " + ref).exit_code, 0);
  const RunResult r = run(megatron() + flags() +
                          " --train-iters 4 --check-for-spiky-loss"
                          " --rerun-mode report_stats --log-json " +
                          got);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count(r.output, "Stats on computation determinism in validation calls"), 2u)
      << r.output;  // after iterations 2 and 4
  for (const char* call : {"found NaN in local forward loss calculation",
                           "found Inf in local forward loss calculation", "Spiky loss"})
    EXPECT_NE(r.output.find(std::string("  From validation call '") + call +
                            "':\n    4 samples, all identical"),
              std::string::npos)
        << call << "\n"
        << r.output;
  EXPECT_NE(r.output.find("2 samples, all identical"), std::string::npos) << r.output;
  const JsonLogLines a = read_log_json(ref), b = read_log_json(got);
  ASSERT_EQ(b.train.size(), 4u);
  for (int64_t it = 1; it <= 4; ++it)
    EXPECT_EQ(a.train.at(it)["loss"], b.train.at(it)["loss"]) << "iteration " << it;
  // validate_results on a healthy run: nothing to re-run, the same losses.
  const std::string val = dir.file("val.json");
  const RunResult v = run(megatron() + flags() +
                          " --train-iters 4 --rerun-mode validate_results"
                          " --log-json " +
                          val);
  ASSERT_EQ(v.exit_code, 0) << v.output;
  EXPECT_EQ(v.output.find("Need to rerun"), std::string::npos) << v.output;
  const JsonLogLines c = read_log_json(val);
  for (int64_t it = 1; it <= 4; ++it)
    EXPECT_EQ(a.train.at(it)["loss"], c.train.at(it)["loss"]) << "iteration " << it;
}

TEST_F(RerunMode, OnAGpuItIsRefusedByName) {
  const RunResult r = run(megatron() + flags() +
                          " --train-iters 2 --device cuda"
                          " --rerun-mode report_stats");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--rerun-mode report_stats with --device cuda is not built"),
            std::string::npos)
      << r.output;
}

}  // namespace rerun_mode_test
}  // namespace mt::test
