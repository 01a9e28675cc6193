// Megatron's checkpoint-mechanics and check/log flags (args/run_check_args.h):
// --async-save writes the same bytes as a synchronous save and a kill -9
// during it loses nothing; --no-save-optim, --exit-on-missing-checkpoint; the
// log flags' keys; the refusals.
#include <signal.h>

#include <filesystem>

#include "background_run.h"
#include "cli_test_util.h"

namespace mt::test {
namespace async_save_test {

namespace fs = std::filesystem;

class AsyncSave : public ::testing::Test {
 protected:
  TempDir dir;
  std::string data;
  void SetUp() override { data = prepare_data(dir, synthetic_corpus(60)); }
  std::string train(const std::string& extra) const {
    return megatron() + " train" + data + tiny_model_flags() + " --eval-interval 0" + extra;
  }
};

TEST_F(AsyncSave, WritesTheSameBytesAsASynchronousSave) {
  const std::string sync = dir.file("sync"), async = dir.file("async");
  ASSERT_EQ(run(train(" --train-iters 10 --save-interval 5 --save " + sync)).exit_code, 0);
  const RunResult r = run(train(" --train-iters 10 --save-interval 5 --async-save --save " + async));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--async-save: committed"), std::string::npos) << r.output;
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(sync)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), sync).string();
    EXPECT_EQ(read_text(e.path().string()), read_text(async + "/" + rel)) << rel;
    ++files;
  }
  EXPECT_GE(files, 7u);
}

// The background writer waits (a test hook) so that the kill -9 lands while
// a save is in progress: first the run's first save (nothing committed), then
// a resumed run's save of iteration 10 (iteration 5 stays the one resumed,
// and resuming reproduces the uninterrupted run's losses). While the first
// save is in flight a second run on the same --save is refused (the lock).
TEST_F(AsyncSave, AKillDuringABackgroundSaveLosesNothing) {
  const std::string root = dir.file(""), ckpt = dir.file("ckpt");
  const auto kill_when = [&](BackgroundRun& job, const std::string& path, bool try_second) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!exists(path) && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(exists(path)) << job.output();
    if (try_second) {  // the folder stays locked while its background save is in flight
      const RunResult second = run(train(" --train-iters 10 --save " + ckpt));
      EXPECT_NE(second.exit_code, 0) << second.output;
      EXPECT_NE(second.output.find("--save " + ckpt + " is in use by another megatron run ("),
                std::string::npos) << second.output;
      EXPECT_TRUE(exists(path)) << "the refused run must not touch the save in flight";
    }
    for (pid_t p : BackgroundRun::pids_matching(root))  // the trainer, not the shell waiting on it
      if (read_text("/proc/" + std::to_string(p) + "/comm") == "megatron\n") ::kill(p, SIGKILL);
    ASSERT_TRUE(job.wait(30));
    EXPECT_EQ(job.exit_code(), 128 + SIGKILL) << job.output();
  };
  const std::string delayed = "env MT_TEST_ASYNC_SAVE_DELAY_S=30 ";
  {
    BackgroundRun job(delayed + train(" --train-iters 10 --save-interval 5 --async-save --save " +
                                      ckpt), root);
    kill_when(job, ckpt + "/iter_0000005.tmp", /*try_second=*/true);
  }
  EXPECT_FALSE(exists(ckpt + "/latest_checkpointed_iteration.txt"));  // nothing committed
  const RunResult first = run(train(" --train-iters 10 --exit-interval 5 --async-save --save " +
                                    ckpt + " --overwrite-checkpoints"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  {
    BackgroundRun job(delayed + train(" --train-iters 10 --async-save --load " + ckpt +
                                      " --save " + ckpt), root);
    kill_when(job, ckpt + "/iter_0000010.tmp", /*try_second=*/false);
  }
  EXPECT_EQ(read_text(ckpt + "/latest_checkpointed_iteration.txt"), "5\n");
  const std::string resumed = dir.file("resumed.json"), ref = dir.file("ref.json");
  const RunResult again = run(train(" --train-iters 10 --load " + ckpt + " --save " + ckpt +
                                    " --log-json " + resumed));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  ASSERT_EQ(run(train(" --train-iters 10 --log-json " + ref)).exit_code, 0);
  const JsonLogLines a = read_log_json(ref), b = read_log_json(resumed);
  for (int64_t it = 6; it <= 10; ++it)
    EXPECT_EQ(a.train.at(it)["loss"], b.train.at(it)["loss"]) << "iteration " << it;
}

TEST_F(AsyncSave, NoSaveOptimWritesWeightsOnlyAndResumesWithAFreshOptimizer) {
  const std::string ckpt = dir.file("ckpt");
  ASSERT_EQ(run(train(" --train-iters 5 --lr-warmup-iters 1 --no-save-optim --save " + ckpt)).exit_code, 0);
  EXPECT_TRUE(exists(ckpt + "/iter_0000005/mp_rank_00_000/model.safetensors"));
  EXPECT_FALSE(exists(ckpt + "/iter_0000005/mp_rank_00_000/optim_dp_000.safetensors"));
  // As Megatron: loading the optimizer from it is an error naming --no-load-optim.
  const RunResult refused = run(train(" --train-iters 8 --lr-warmup-iters 1 --load " + ckpt));
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("--no-load-optim"), std::string::npos) << refused.output;
  const RunResult r = run(train(" --train-iters 8 --lr-warmup-iters 1 --no-load-optim --load " + ckpt));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("at iteration 5"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("iteration        8/"), std::string::npos) << r.output;
}

TEST_F(AsyncSave, ExitOnMissingCheckpointRefusesAnEmptyLoad) {
  const RunResult r =
      run(train(" --train-iters 6 --exit-on-missing-checkpoint --load " + dir.file("none")));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--exit-on-missing-checkpoint: --load"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("iteration        1/"), std::string::npos) << r.output;
}

TEST_F(AsyncSave, LogFlagsWriteMegatronsKeysAndProgress) {
  const std::string ckpt = dir.file("ckpt"), log = dir.file("log.json");
  const RunResult r = run(train(
      " --train-iters 6 --save " + ckpt + " --log-json " + log +
      " --log-params-norm --log-num-zeros-in-grad --log-progress --timing-log-level 1"
      " --timing-log-option max --log-straggler --check-for-spiky-loss --deterministic-mode"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* part : {"params norm: ", "num zeros: ", "max time across ranks (ms):",
                           "forward-backward ....", "straggler: MnRtt/Rnk:",
                           "--deterministic-mode: CPU runs"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << " in:\n" << r.output;
  const JsonLogLines j = read_log_json(log);
  EXPECT_GT(j.train.at(6)["params_norm"].get<double>(), 0);
  EXPECT_GE(j.train.at(6)["num_zeros"].get<int64_t>(), 0);
  EXPECT_TRUE(j.train.at(6).contains("straggler_slowest_rank"));
  const std::string progress = read_text(ckpt + "/progress.txt");
  EXPECT_NE(progress.find("\t# GPUs: 1\tStarting job\n"), std::string::npos) << progress;
  EXPECT_NE(progress.find("\tSaved checkpoint\tIteration: 6\tJob throughput: "),
            std::string::npos) << progress;
}

TEST_F(AsyncSave, ParamsNormAndNumZerosMatchOneRankUnderDataParallel) {
  const std::string one = dir.file("one.json"), two = dir.file("two.json");
  const std::string flags = " --train-iters 3 --lr-warmup-iters 1 --log-params-norm --log-num-zeros-in-grad";
  ASSERT_EQ(run(train(flags + " --log-json " + one)).exit_code, 0);
  const RunResult r = run(mpirun(2) + " train" + data + tiny_model_flags() +
                          " --eval-interval 0 --use-distributed-optimizer" + flags +
                          " --log-json " + two);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const JsonLogLines a = read_log_json(one), b = read_log_json(two);
  for (int64_t it = 1; it <= 3; ++it) {
    EXPECT_NEAR(a.train.at(it)["params_norm"].get<double>(),
                b.train.at(it)["params_norm"].get<double>(), 1e-5);
    EXPECT_EQ(a.train.at(it)["num_zeros"], b.train.at(it)["num_zeros"]);
  }
}

TEST_F(AsyncSave, NanCheckIsOnByDefaultAndTheNoFormTrainsOn) {
  const std::string blow_up = " --train-iters 3 --lr 1e30 --clip-grad 0 --lr-warmup-iters 1";
  const RunResult checked = run(train(blow_up));
  EXPECT_NE(checked.exit_code, 0);
  EXPECT_NE(checked.output.find("is not finite"), std::string::npos) << checked.output;
  const RunResult unchecked = run(train(blow_up + " --no-check-for-nan-in-loss-and-grad"));
  EXPECT_EQ(unchecked.exit_code, 0) << unchecked.output;
}

TEST_F(AsyncSave, UnbuiltOrBadValuesAreRefusedByName) {
  for (const auto& [flag, expected] :
       std::vector<std::pair<std::string, std::string>>{
           {" --rerun-mode sometimes", "--rerun-mode sometimes is not one of Megatron's choices"},
           {" --timing-log-level 3", "--timing-log-level 3"},
           {" --timing-log-option min", "--timing-log-option min"},
           {" --log-progress", "no --save was given"}}) {
    const RunResult r = run(train(" --train-iters 6" + flag));
    EXPECT_NE(r.exit_code, 0) << flag;
    EXPECT_NE(r.output.find(expected), std::string::npos) << flag << ":\n" << r.output;
  }
}

}  // namespace async_save_test
}  // namespace mt::test
