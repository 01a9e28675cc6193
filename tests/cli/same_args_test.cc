// Ranks launched with different arguments (mpirun's `:` gives each rank its
// own command line) fail at start-up with one line naming the first
// differing flag and both values, in seconds, instead of hanging (another
// --train-iters) or training inconsistently (another --seed or --lr);
// identical arguments, even written differently, still train.
#include <chrono>
#include <regex>
#include <set>

#include "args/args_list.h"
#include "cli_test_util.h"

namespace mt::test {
namespace same_args_test {

struct Mpmd {
  RunResult r;
  double seconds = 0;
};

// Rank 0 runs `train <common><rank0>`, rank 1 `train <common><rank1>`.
Mpmd run_two_ranks(const std::string& common, const std::string& rank0, const std::string& rank1) {
  const std::string bin = std::string(MT_BINARY) + " train" + common;
  const auto t0 = std::chrono::steady_clock::now();
  Mpmd m;
  m.r = run("timeout 120 mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -n 1 " + bin +
            rank0 + " : -n 1 " + bin + rank1);
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

class SameArgs : public ::testing::Test {
 protected:
  void SetUp() override {
    common_ = prepare_data(dir_, synthetic_corpus(50)) + tiny_model_flags() + " --eval-interval 0";
  }
  // A mismatch must end the job, non-zero, within seconds (a hang would run
  // into the 120 s timeout: exit 124), with `message` in the output.
  void expect_refused(const std::string& rank0, const std::string& rank1,
                      const std::string& message) {
    const Mpmd m = run_two_ranks(common_, rank0, rank1);
    EXPECT_NE(m.r.exit_code, 0) << m.r.output;
    EXPECT_NE(m.r.exit_code, 124) << "job hung\n" << m.r.output;
    EXPECT_LT(m.seconds, 20.0) << m.r.output;
    EXPECT_NE(m.r.output.find(message), std::string::npos) << m.r.output;
    EXPECT_EQ(m.r.output.find("iteration        1/"), std::string::npos)
        << "trained before refusing\n" << m.r.output;
  }
  TempDir dir_;
  std::string common_;
};

TEST_F(SameArgs, AnotherTrainItersFailsNamingTheFlag) {
  expect_refused(" --train-iters 10", " --train-iters 20",
                 "rank 1 was launched with --train-iters 20 but rank 0 with --train-iters 10; "
                 "fix: launch every rank with the same arguments");
}

TEST_F(SameArgs, AnotherSeedFailsNamingTheFlag) {
  expect_refused(" --train-iters 8", " --train-iters 8 --seed 99",
                 "rank 1 was launched with --seed 99 but rank 0 with --seed 1234");
}

TEST_F(SameArgs, AnotherLrFailsNamingTheFlag) {
  // tiny_model_flags gives --lr 3e-3; the last value wins.
  expect_refused(" --train-iters 8 --lr 1e-3", " --train-iters 8",
                 "rank 1 was launched with --lr 0.003 but rank 0 with --lr 0.001");
}

TEST_F(SameArgs, ASwitchGivenOnOneRankOnlyFails) {
  expect_refused(" --train-iters 8", " --train-iters 8 --log-parallel-layout",
                 "rank 1 was launched with --log-parallel-layout but rank 0 without "
                 "--log-parallel-layout");
}

// Another layout: the groups (built before the check, by collectives every
// rank makes alike) do not hang; the check names the flag.
TEST_F(SameArgs, AnotherPipelineSizeFailsNamingTheFlag) {
  expect_refused(" --train-iters 8", " --train-iters 8 --pipeline-model-parallel-size 2",
                 "rank 1 was launched with --pipeline-model-parallel-size 2 but rank 0 with "
                 "--pipeline-model-parallel-size 1");
}

// The same values written differently (1e-3 / 0.001, a flag / its default,
// a config file / the flags it holds) are the same arguments: the job trains.
TEST_F(SameArgs, IdenticalArgumentsStillTrain) {
  write_text(dir_.file("run.toml"), "train-iters = 6\nseed = 1234\n");
  const std::string json = dir_.file("log.json");
  const Mpmd m = run_two_ranks(common_, " --lr 1e-3 --train-iters 6 --log-json " + json,
                               " --config " + dir_.file("run.toml") + " --lr 0.001 --log-json " +
                                   json);
  ASSERT_EQ(m.r.exit_code, 0) << m.r.output;
  const JsonLogLines log = read_log_json(json);
  EXPECT_EQ(log.train.size(), 6u) << m.r.output;
}

// Every flag `megatron train --help` shows is compared (args/args_list.h),
// but --help and --config (whose file is expanded into the flags it holds).
TEST(SameArgsList, HoldsEveryTrainFlag) {
  const RunResult r = run(megatron() + " train --help");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::set<std::string> listed;
  const TrainArgs defaults;
  for (const auto& [flag, value] : argument_list(defaults)) listed.insert(flag);
  const std::regex option_line(R"(^\s+(?:-h,)?(--[a-z0-9-]+))");
  std::istringstream lines(r.output);
  std::string line;
  int shown = 0;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, option_line)) continue;
    ++shown;
    const std::string flag = m[1];
    if (flag == "--help" || flag == "--config") continue;
    // Megatron's deprecated spellings hold no value of their own: the first
    // sets --position-embedding-type (listed), the second only checks it.
    if (flag == "--use-rotary-position-embeddings" || flag == "--no-position-embedding") {
      EXPECT_EQ(listed.count("--position-embedding-type"), 1u);
      continue;
    }
    EXPECT_EQ(listed.count(flag), 1u) << flag << " is not in args/args_list.cc's list";
  }
  EXPECT_GE(shown, int(listed.size())) << r.output;
}

}  // namespace same_args_test
}  // namespace mt::test
