// --async-save on two ranks (DP2 with the distributed optimizer, and TP2):
// the background writer's checkpoints are byte for byte those of a
// synchronous save, and resuming from one reproduces the uninterrupted
// run's losses exactly. A kill -9 of one rank while the save is in flight
// ends the job (the other rank does not wait for it) and loses nothing.
#include <signal.h>

#include <filesystem>

#include "background_run.h"
#include "cli_test_util.h"

namespace mt::test {
namespace async_save_ranks_test {

namespace fs = std::filesystem;

class AsyncSaveRanks : public ::testing::TestWithParam<std::pair<const char*, const char*>> {
 protected:
  TempDir dir;
  std::string data;
  void SetUp() override { data = prepare_data(dir, synthetic_corpus(60)); }
  std::string train(const std::string& extra) const {
    return mpirun(2) + " train" + data + tiny_model_flags() + " --eval-interval 0" +
           GetParam().second + extra;
  }
};

TEST_P(AsyncSaveRanks, SameBytesAsSyncAndResumesToTheSameLosses) {
  const std::string sync = dir.file("sync"), async = dir.file("async");
  const std::string ref_log = dir.file("ref.json"), resumed_log = dir.file("resumed.json");
  const std::string six = " --train-iters 6 --save-interval 3";
  const RunResult s = run(train(six + " --save " + sync + " --log-json " + ref_log));
  ASSERT_EQ(s.exit_code, 0) << s.output;
  const RunResult a = run(train(six + " --async-save --save " + async));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("saved checkpoint at iteration 3 to " + async +
                          " (--async-save: "
                          "committed"),
            std::string::npos)
      << a.output;
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(sync)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), sync).string();
    ASSERT_TRUE(exists(async + "/" + rel)) << rel;
    EXPECT_EQ(read_text(e.path().string()), read_text(async + "/" + rel)) << rel;
    ++files;
  }
  size_t async_files = 0;
  for (const auto& e : fs::recursive_directory_iterator(async)) async_files += e.is_regular_file();
  EXPECT_EQ(async_files, files);  // nothing more either (no .tmp left behind)
  EXPECT_GE(files, 8u) << "two iterations of two ranks' shards";
  // Resume from the background-written iteration 3 (the tracker pointed back at it).
  fs::remove_all(async + "/iter_0000006");
  write_text(async + "/latest_checkpointed_iteration.txt", "3\n");
  const RunResult r = run(train(" --train-iters 6 --load " + async + " --log-json " + resumed_log));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("at iteration 3"), std::string::npos) << r.output;
  const JsonLogLines ref = read_log_json(ref_log), got = read_log_json(resumed_log);
  ASSERT_EQ(got.train.size(), 3u);
  for (int64_t it = 4; it <= 6; ++it)
    EXPECT_EQ(ref.train.at(it)["loss"], got.train.at(it)["loss"]) << "iteration " << it;
}

// The writer waits 30 s (the test hook); rank 1 is killed meanwhile. The job
// ends well before the writer would have finished, iteration 5 stays the one
// resumed, and resuming reproduces the uninterrupted run.
class AsyncSaveRankKill : public AsyncSaveRanks {};  // one layout: the kill does not depend on it

TEST_P(AsyncSaveRankKill, KillingOneRankDuringABackgroundSaveEndsTheJobAndLosesNothing) {
  const std::string root = dir.file(""), ckpt = dir.file("ckpt");
  const std::string ref_log = dir.file("ref.json"), resumed_log = dir.file("resumed.json");
  ASSERT_EQ(run(train(" --train-iters 10 --log-json " + ref_log)).exit_code, 0);
  const RunResult first = run(train(" --train-iters 10 --exit-interval 5 --save " + ckpt));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  {
    BackgroundRun job(
        "env MT_TEST_ASYNC_SAVE_DELAY_S=30 " +
            train(" --train-iters 10 --async-save --load " + ckpt + " --save " + ckpt),
        root);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    while (!exists(ckpt + "/iter_0000010.tmp") && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(exists(ckpt + "/iter_0000010.tmp")) << job.output();
    int killed = 0;
    for (pid_t p : BackgroundRun::pids_matching(root, 1))
      if (read_text("/proc/" + std::to_string(p) + "/comm") == "megatron\n")
        killed += ::kill(p, SIGKILL) == 0;
    EXPECT_EQ(killed, 1);
    ASSERT_TRUE(job.wait(25)) << "rank 0 kept waiting for the killed rank:\n" << job.output();
    EXPECT_NE(job.exit_code(), 0) << job.output();
  }
  EXPECT_EQ(read_text(ckpt + "/latest_checkpointed_iteration.txt"), "5\n");
  const RunResult r = run(
      train(" --train-iters 10 --load " + ckpt + " --save " + ckpt + " --log-json " + resumed_log));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const JsonLogLines ref = read_log_json(ref_log), got = read_log_json(resumed_log);
  for (int64_t it = 6; it <= 10; ++it)
    EXPECT_EQ(ref.train.at(it)["loss"], got.train.at(it)["loss"]) << "iteration " << it;
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, AsyncSaveRanks,
    ::testing::Values(std::make_pair("dp2_zero", " --use-distributed-optimizer"),
                      std::make_pair("tp2", " --tensor-model-parallel-size 2")),
    [](const auto& info) { return std::string(info.param.first); });

INSTANTIATE_TEST_SUITE_P(DataParallel, AsyncSaveRankKill,
                         ::testing::Values(std::make_pair("dp2_zero",
                                                          " --use-distributed-optimizer")),
                         [](const auto& info) { return std::string(info.param.first); });

}  // namespace async_save_ranks_test
}  // namespace mt::test
