// Disk full during a save (issue 14's faults): on a real small file system (a
// tmpfs mounted by the test; fails where mount is not permitted) the first
// checkpoint fits and the second does not. The save fails with one line
// naming ENOSPC, the directory and the fix, the job exits non-zero, the
// tracker still names the first checkpoint, the half-written iteration is
// never taken for complete, and resuming from it reproduces the
// uninterrupted run's losses.
#include <filesystem>

#include "cli_test_util.h"
#include "disk_fault_util.h"

namespace mt::test {
namespace checkpoint_disk_full_test {

namespace fs = std::filesystem;

TEST(CheckpointDiskFull, TheSecondSaveFailsAndThePreviousCheckpointResumesExactly) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(60));
  const std::string common = megatron() + " train" + data + tiny_model_flags() +
                             " --eval-interval 0 --train-iters 10";
  const RunResult straight = run(common + " --log-json " + dir.file("straight.json"));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;

  // One checkpoint of this model is ~390 KB (weights + Adam moments) plus the
  // tokenizer and meta.json: 600 KB holds one, not two.
  const std::string mnt = dir.file("small_disk");
  TmpfsMount disk(mnt, "600k");
  // Tests and CI run as root (README): not being able to mount is a failure.
  ASSERT_TRUE(disk.ok()) << "cannot mount a tmpfs on " << mnt << " (" << disk.error()
                         << "): the test needs root and mount permission (CAP_SYS_ADMIN)";
  const std::string ckpt = mnt + "/ckpt";
  const RunResult full = run(common + " --save-interval 5 --save " + ckpt + " --log-json " +
                             dir.file("first.json"));
  EXPECT_NE(full.exit_code, 0) << full.output;
  EXPECT_NE(full.output.find("saved checkpoint at iteration 5"), std::string::npos) << full.output;
  // One line: ENOSPC by name, the directory, what still loads, the fix.
  const std::string line = last_error_line(full.output);
  for (const std::string& want :
       {std::string("No space left on device"), ckpt + "/iter_0000010",
        std::string("checkpoint of iteration 10 was not saved"), ckpt + " still resumes from iteration 5",
        "fix: free space in " + ckpt})
    EXPECT_NE(line.find(want), std::string::npos) << "'" << want << "' not in: " << line
                                                   << "\nfull output:\n" << full.output;
  EXPECT_EQ(read_text(ckpt + "/latest_checkpointed_iteration.txt"), "5\n");
  EXPECT_FALSE(exists(ckpt + "/iter_0000010")) << "a half-written save looks complete";

  // Resume from it (the disk is still too small for a second checkpoint, so
  // without --save) and compare with the run that was never interrupted.
  const RunResult resumed = run(common + " --load " + ckpt + " --log-json " +
                                dir.file("resumed.json"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("loaded checkpoint from " + ckpt + " at iteration 5"),
            std::string::npos) << resumed.output;
  const JsonLogLines a = read_log_json(dir.file("straight.json")),
                     b = read_log_json(dir.file("resumed.json"));
  ASSERT_EQ(a.train.size(), 10u);
  ASSERT_EQ(b.train.size(), 5u);
  for (int64_t it = 6; it <= 10; ++it) {
    EXPECT_EQ(b.train.at(it).at("loss").get<double>(), a.train.at(it).at("loss").get<double>())
        << "iteration " << it;
    EXPECT_EQ(b.train.at(it).at("grad_norm").get<double>(),
              a.train.at(it).at("grad_norm").get<double>())
        << "iteration " << it;
  }
}

}  // namespace checkpoint_disk_full_test
}  // namespace mt::test
