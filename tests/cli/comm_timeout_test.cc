// --distributed-timeout-minutes end to end (dist/watchdog.h): a rank that
// stops without dying (SIGSTOP, as a frozen node or a stalled file system)
// ends the whole job within the timeout, with a message naming the group and
// operation the others waited on; a pause shorter than the timeout is
// survived with the uninterrupted run's losses.
#include "background_run.h"
#include "cli_test_util.h"

namespace mt::test {
namespace comm_timeout_test {

constexpr double kTimeoutMinutes = 0.1;  // 6 s
constexpr double kTimeoutSeconds = kTimeoutMinutes * 60;

std::string timeout_flag() {
  return " --distributed-timeout-minutes " + std::to_string(kTimeoutMinutes);
}

// Stops world rank `victim` of a long run at iteration 3, then expects the
// job to end with the watchdog's message within the timeout plus a margin
// for mpirun to take the others down.
void expect_stopped_rank_ends_job(int ranks, const std::string& layout, int victim) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(100));
  BackgroundRun job(mpirun(ranks) + " train" + data + tiny_model_flags() + layout +
                        timeout_flag() + " --train-iters 100000 --eval-interval 0 --log-json " +
                        dir.file("log.json"),
                    dir.file(""));
  ASSERT_TRUE(wait_for_iteration(dir.file("log.json"), 3, 120)) << job.output();
  const std::vector<pid_t> pids = BackgroundRun::pids_matching(dir.file(""), victim);
  ASSERT_EQ(pids.size(), 1u) << "the process of rank " << victim;
  ASSERT_EQ(::kill(pids[0], SIGSTOP), 0);
  const auto stopped = std::chrono::steady_clock::now();
  ASSERT_TRUE(job.wait(kTimeoutSeconds + 30)) << "the job still runs "
                                              << kTimeoutSeconds + 30 << " s after rank "
                                              << victim << " stopped:\n"
                                              << job.output();
  const double after = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped)
                           .count();
  const std::string out = job.output();
  EXPECT_NE(job.exit_code(), 0) << out;
  EXPECT_NE(out.find("error: no progress for"), std::string::npos) << out;
  EXPECT_NE(out.find("--distributed-timeout-minutes 0.1"), std::string::npos) << out;
  EXPECT_NE(out.find(" on group '"), std::string::npos) << out;
  EXPECT_NE(out.find("world ranks"), std::string::npos) << out;
  EXPECT_GE(after, kTimeoutSeconds * 0.9) << out;
  EXPECT_LE(after, kTimeoutSeconds + 20) << out;
}

TEST(CommTimeout, StoppedRankEndsDataParallelJob) {
  expect_stopped_rank_ends_job(2, "", 1);
}

TEST(CommTimeout, StoppedRankEndsTensorAndPipelineParallelJob) {
  expect_stopped_rank_ends_job(
      4, " --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --global-batch-size 16",
      2);
}

TEST(CommTimeout, PauseShorterThanTheTimeoutIsSurvivedWithTheSameLosses) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(100));
  const std::string common = mpirun(2) + " train" + data + tiny_model_flags() + timeout_flag() +
                             " --train-iters 400 --eval-interval 0 --log-json ";
  const RunResult straight = run(common + dir.file("a.json"));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;

  // (400 iterations of ~1 ms: the job must still be running when the test,
  // polling every 50 ms, has seen iteration 3 and stops a rank; 40 were not.)
  BackgroundRun job(common + dir.file("b.json"), dir.file(""));
  ASSERT_TRUE(wait_for_iteration(dir.file("b.json"), 3, 120)) << job.output();
  const std::vector<pid_t> pids = BackgroundRun::pids_matching(dir.file(""), 1);
  ASSERT_EQ(pids.size(), 1u);
  ASSERT_EQ(::kill(pids[0], SIGSTOP), 0);
  std::this_thread::sleep_for(std::chrono::duration<double>(kTimeoutSeconds / 2));
  ASSERT_EQ(::kill(pids[0], SIGCONT), 0);
  ASSERT_TRUE(job.wait(180)) << job.output();
  ASSERT_EQ(job.exit_code(), 0) << job.output();
  // The pause was a healthy wait of more than a third of the timeout.
  EXPECT_NE(job.output().find("warning: a healthy wait lasted"), std::string::npos)
      << job.output();
  const JsonLogLines a = read_log_json(dir.file("a.json")), b = read_log_json(dir.file("b.json"));
  ASSERT_EQ(a.train.size(), 400u);
  ASSERT_EQ(b.train.size(), 400u);
  for (int64_t it = 1; it <= 400; ++it)
    EXPECT_EQ(a.train.at(it).at("loss").get<double>(), b.train.at(it).at("loss").get<double>())
        << "iteration " << it;
}

// tests/comm/finalize_probe.cc, built into the tests folder of the build.
std::string finalize_probe() {
  return (std::filesystem::path(MT_BINARY).parent_path() / "tests" / "finalize_probe").string();
}

// A peer that never reaches MPI_Finalize (frozen at the very end of a job):
// the ranks waiting there are ended by the watchdog too. The probe's rank 1
// sleeps 60 s before finalising; with a 3 s timeout the job must end long
// before that, with the watchdog's line. (Without the watch over
// MPI_Finalize it would end after 60 s with exit code 0.)
TEST(CommTimeout, PeerMissingAtFinalizeEndsJob) {
  const auto start = std::chrono::steady_clock::now();
  const RunResult r = run("env PROBE_TIMEOUT_S=3 PROBE_SLEEP_S=60 timeout 300 mpirun "
                          "--oversubscribe --bind-to none -n 2 -x PROBE_TIMEOUT_S -x PROBE_SLEEP_S " +
                          finalize_probe());
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("in MPI_Finalize on group 'world' (all 2 ranks)"), std::string::npos)
      << r.output;
  EXPECT_LT(took, 40) << r.output;
}

TEST(CommTimeout, NegativeTimeoutIsRefused) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(20));
  const RunResult r = run(megatron() + " train" + data + tiny_model_flags() +
                          " --train-iters 2 --distributed-timeout-minutes -1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--distributed-timeout-minutes -1"), std::string::npos) << r.output;
}

}  // namespace comm_timeout_test
}  // namespace mt::test
