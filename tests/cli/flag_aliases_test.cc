// Megatron flags whose meaning is one this build has already:
// --recompute-activations is --recompute-granularity selective (what this
// build always does: the same losses); --calculate-per-token-loss equals the
// micro-batch average while every token counts (without --eod-mask-loss; with
// it, tests/cli/documents_test.cc), alone and at DP2; --vocab-extra-ids (T5's span-masking tokens, none for GPT) is
// accepted and named in the start-up note.
#include "bad_input_util.h"

namespace mt::test {
namespace flag_aliases_test {

class FlagAliases : public BadInputFixture {
 protected:
  JsonLogLines train_log(const std::string& launch, const std::string& name) {
    const RunResult r = run(launch + " --log-json " + dir.file(name));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    last_output = r.output;
    return read_log_json(dir.file(name));
  }
  std::string last_output;
};

TEST_F(FlagAliases, RecomputeActivationsIsSelectiveRecompute) {
  const JsonLogLines ref = train_log(megatron() + train(""), "ref.json");
  const JsonLogLines sel = train_log(megatron() + train(" --recompute-activations"), "sel.json");
  expect_same_losses(ref, sel, "--recompute-activations", 0);
  // Selective recompute has no method, so neither has --recompute-activations.
  expect_fails({"method", train(" --recompute-activations --recompute-method uniform"),
                "--recompute-method uniform needs --recompute-granularity full"});
}

TEST_F(FlagAliases, PerTokenLossEqualsTheAverageWhileEveryTokenCounts) {
  const JsonLogLines ref = train_log(megatron() + train(""), "ref.json");
  const JsonLogLines one = train_log(megatron() + train(" --calculate-per-token-loss"), "one.json");
  expect_same_losses(ref, one, "per-token loss", 0);
  const JsonLogLines dp2 = train_log(mpirun(2) + train(" --calculate-per-token-loss"), "dp2.json");
  expect_same_losses(ref, dp2, "per-token loss at DP2", 1e-5);
}

TEST_F(FlagAliases, VocabExtraIdsIsAcceptedAndNoted) {
  train_log(megatron() + train(" --vocab-extra-ids 100"), "extra.json");
  EXPECT_NE(last_output.find("--vocab-extra-ids 100"), std::string::npos) << last_output;
}

TEST(FlagAliasesHelp, HelpShowsTheFlags) {
  const RunResult r = run(megatron() + " train --help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* flag : {"--rampup-batch-size", "--recompute-activations",
                           "--calculate-per-token-loss", "--vocab-extra-ids", "--data-args-path",
                           "--per-split-data-args-path"})
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
}

}  // namespace flag_aliases_test
}  // namespace mt::test
