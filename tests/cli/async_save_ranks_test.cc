// --async-save on two ranks (DP2 with the distributed optimizer, and TP2):
// the background writer's checkpoints are byte for byte those of a
// synchronous save, and resuming from one reproduces the uninterrupted
// run's losses exactly.
#include <filesystem>

#include "cli_test_util.h"

namespace mt::test {
namespace {

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
  EXPECT_NE(a.output.find("saved checkpoint at iteration 3 to " + async + " (--async-save: "
                          "committed"), std::string::npos) << a.output;
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
  const RunResult r =
      run(train(" --train-iters 6 --load " + async + " --log-json " + resumed_log));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("at iteration 3"), std::string::npos) << r.output;
  const JsonLogLines ref = read_log_json(ref_log), got = read_log_json(resumed_log);
  ASSERT_EQ(got.train.size(), 3u);
  for (int64_t it = 4; it <= 6; ++it)
    EXPECT_EQ(ref.train.at(it)["loss"], got.train.at(it)["loss"]) << "iteration " << it;
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, AsyncSaveRanks,
    ::testing::Values(std::make_pair("dp2_zero", " --use-distributed-optimizer"),
                      std::make_pair("tp2", " --tensor-model-parallel-size 2")),
    [](const auto& info) { return std::string(info.param.first); });

}  // namespace
}  // namespace mt::test
