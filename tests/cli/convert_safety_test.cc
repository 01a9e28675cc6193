// `megatron convert` never leaves a partial output (issue 27 item 5): both
// directions write into a working directory (<save-dir>.tmp beside a Hugging
// Face folder, release.tmp in a checkpoint folder) and rename it into place
// when complete, replacing an existing copy by rename-aside. Checked against a
// real full disk (a small tmpfs), a process killed in the middle of an export,
// and the states a kill between the renames leaves.
#include <signal.h>

#include <filesystem>

#include "cli_test_util.h"
#include "convert_test_util.h"
#include "disk_fault_util.h"

namespace mt::test {
namespace convert_safety_test {

namespace fs = std::filesystem;

// A file of `mb` MB (written, so that tmpfs counts it).
void fill(const std::string& path, int mb) {
  write_text(path, std::string(size_t(mb) << 20, 'x'));
}

// A gpt2 folder (6.5 MB of weights, 1.5 MB of tokenizer files) and its release checkpoint.
void make_model(const TempDir& dir, const std::string& hf, const std::string& ckpt) {
  require_torch();
  if (testing::Test::HasFatalFailure()) return;
  make_hf_folder("gpt2", dir, hf, 31);
  if (testing::Test::HasFatalFailure()) return;
  const RunResult in = run(convert(" --loader hf --saver megatron --load-dir " + hf +
                                   " --save-dir " + ckpt));
  ASSERT_EQ(in.exit_code, 0) << in.output;
}

TEST(ConvertSafety, AFullDiskLeavesNoPartialHfFolderAndKeepsTheOldModel) {
  TempDir dir;
  const std::string hf = dir.file("hf"), ckpt = dir.file("ckpt");
  make_model(dir, hf, ckpt);
  if (HasFatalFailure()) return;
  const std::string mnt = dir.file("small_disk"), out = mnt + "/out";
  TmpfsMount disk(mnt, "16m");
  ASSERT_TRUE(disk.ok()) << "cannot mount a tmpfs on " << mnt << " (" << disk.error()
                         << "): the test needs root and mount permission (CAP_SYS_ADMIN)";
  // 7 MB free: the weights fit, the tokenizer files do not.
  fill(mnt + "/filler", 9);
  const std::string export_flags = " --loader megatron --saver hf --load-dir " + ckpt +
                                   " --save-dir " + out + " --max-shard-size-mb 1";
  const RunResult full = run(convert(export_flags));
  EXPECT_NE(full.exit_code, 0) << full.output;
  const std::string line = last_error_line(full.output);
  EXPECT_NE(line.find("No space left on device"), std::string::npos) << full.output;
  EXPECT_FALSE(exists(out)) << "a partial folder was left:\n" << full.output;
  EXPECT_FALSE(exists(out + ".tmp")) << full.output;

  // Space freed: the rerun is not refused and writes the whole folder.
  fs::remove(mnt + "/filler");
  const RunResult again = run(convert(export_flags));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  expect_same_tensors(hf, out);

  // Replacing it on a disk too small for both copies: the old one stays whole and loadable.
  fill(mnt + "/filler", 3);
  const RunResult replace = run(convert(export_flags + " --overwrite-checkpoints"));
  EXPECT_NE(replace.exit_code, 0) << replace.output;
  EXPECT_NE(last_error_line(replace.output).find("No space left on device"), std::string::npos)
      << replace.output;
  expect_same_tensors(hf, out);
  EXPECT_FALSE(exists(out + ".tmp"));
  EXPECT_FALSE(exists(out + ".old"));
  const RunResult load = run(convert(" --loader hf --saver megatron --load-dir " + out +
                                     " --save-dir " + dir.file("reloaded")));
  EXPECT_EQ(load.exit_code, 0) << load.output;
}

TEST(ConvertSafety, AFullDiskLeavesNoPartialCheckpointAndKeepsTheOldRelease) {
  TempDir dir;
  const std::string hf = dir.file("hf");
  make_model(dir, hf, dir.file("unused"));
  if (HasFatalFailure()) return;
  const std::string mnt = dir.file("small_disk"), ckpt = mnt + "/ckpt";
  TmpfsMount disk(mnt, "16m");
  ASSERT_TRUE(disk.ok()) << "cannot mount a tmpfs on " << mnt << " (" << disk.error() << ")";
  fill(mnt + "/filler", 12);
  const std::string import_flags =
      " --loader hf --saver megatron --load-dir " + hf + " --save-dir " + ckpt;
  const RunResult full = run(convert(import_flags));
  EXPECT_NE(full.exit_code, 0) << full.output;
  EXPECT_NE(last_error_line(full.output).find("No space left on device"), std::string::npos)
      << full.output;
  EXPECT_FALSE(exists(ckpt)) << "a partial checkpoint folder was left:\n" << full.output;

  fs::remove(mnt + "/filler");
  ASSERT_EQ(run(convert(import_flags)).exit_code, 0);
  const std::string meta = read_text(ckpt + "/release/meta.json");
  fill(mnt + "/filler", 4);
  const RunResult replace = run(convert(import_flags + " --overwrite-checkpoints"));
  EXPECT_NE(replace.exit_code, 0) << replace.output;
  EXPECT_EQ(read_text(ckpt + "/latest_checkpointed_iteration.txt"), "release\n");
  EXPECT_EQ(read_text(ckpt + "/release/meta.json"), meta);
  EXPECT_FALSE(exists(ckpt + "/release.tmp")) << replace.output;
  const RunResult load = run(convert(" --loader megatron --saver hf --load-dir " + ckpt +
                                     " --save-dir " + dir.file("exported")));
  ASSERT_EQ(load.exit_code, 0) << load.output;
  expect_same_tensors(hf, dir.file("exported"));
}

// The export dies by a signal in the middle of writing its first weight file:
// prlimit caps the size of a file at 2 MB, and SIGXFSZ's default action ends
// the process there and then, as SIGKILL would (no handler, no clean-up).
TEST(ConvertSafety, AnExportKilledMidWriteLeavesTheOldModelAndTheRerunCleansUp) {
  TempDir dir;
  const std::string hf = dir.file("hf"), ckpt = dir.file("ckpt"), out = dir.file("out");
  make_model(dir, hf, ckpt);
  if (HasFatalFailure()) return;
  const std::string to_hf = " --loader megatron --saver hf --load-dir " + ckpt + " --save-dir " + out;
  ASSERT_EQ(run(convert(to_hf + " --bf16")).exit_code, 0);  // the old model: bf16
  write_text(out + "/README.md", "my notes\n");
  fs::copy(out, dir.file("old_copy"), fs::copy_options::recursive);

  const RunResult killed = run("prlimit --fsize=2000000 --core=0 " +
                               convert(to_hf + " --overwrite-checkpoints"));
  ASSERT_EQ(killed.exit_code, 128 + SIGXFSZ) << killed.output;
  // The old model, whole and loadable; the new one's start only in the working directory.
  expect_same_tensors(dir.file("old_copy"), out);
  EXPECT_EQ(read_text(out + "/config.json"), read_text(dir.file("old_copy") + "/config.json"));
  EXPECT_TRUE(exists(out + ".tmp"));
  const RunResult load = run(convert(" --loader hf --saver megatron --load-dir " + out +
                                     " --save-dir " + dir.file("reloaded")));
  EXPECT_EQ(load.exit_code, 0) << load.output;

  const RunResult again = run(convert(to_hf + " --overwrite-checkpoints"));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("removed " + out + ".tmp (a conversion interrupted by a crash"),
            std::string::npos) << again.output;
  expect_same_tensors(hf, out);  // fp32 now
  EXPECT_EQ(read_text(out + "/README.md"), "my notes\n");  // what the export does not write stays
  EXPECT_FALSE(exists(out + ".tmp"));
  EXPECT_FALSE(exists(out + ".old"));

  // The same for an import over a release checkpoint.
  const std::string to_megatron = " --loader hf --saver megatron --load-dir " + hf +
                                  " --save-dir " + ckpt + " --overwrite-checkpoints";
  const std::string meta = read_text(ckpt + "/release/meta.json");
  const RunResult killed_import = run("prlimit --fsize=2000000 --core=0 " + convert(to_megatron));
  ASSERT_EQ(killed_import.exit_code, 128 + SIGXFSZ) << killed_import.output;
  EXPECT_EQ(read_text(ckpt + "/release/meta.json"), meta);
  EXPECT_EQ(read_text(ckpt + "/latest_checkpointed_iteration.txt"), "release\n");
  EXPECT_TRUE(exists(ckpt + "/release.tmp"));
  const RunResult import_again = run(convert(to_megatron));
  ASSERT_EQ(import_again.exit_code, 0) << import_again.output;
  EXPECT_NE(import_again.output.find("removed " + ckpt + "/release.tmp (a conversion interrupted"),
            std::string::npos) << import_again.output;
  EXPECT_FALSE(exists(ckpt + "/release.tmp"));
}

// A kill between the two renames of a replacement leaves <dir>.old and no
// <dir>: the next run puts it back (and removes the working directory) before
// anything else, in both directions.
TEST(ConvertSafety, AReplacementInterruptedBetweenItsRenamesIsRestored) {
  TempDir dir;
  const std::string hf = dir.file("hf"), ckpt = dir.file("ckpt"), out = dir.file("out");
  make_model(dir, hf, ckpt);
  if (HasFatalFailure()) return;
  const std::string to_hf = " --loader megatron --saver hf --load-dir " + ckpt + " --save-dir " + out;
  ASSERT_EQ(run(convert(to_hf)).exit_code, 0);
  fs::rename(out, out + ".old");
  fs::create_directories(out + ".tmp");
  write_text(out + ".tmp/model.safetensors", "half");
  const RunResult r = run(convert(to_hf));
  EXPECT_NE(r.exit_code, 0) << r.output;  // it holds a model again
  EXPECT_NE(r.output.find("restored " + out + " from " + out + ".old"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("already holds a model"), std::string::npos) << r.output;
  expect_same_tensors(hf, out);
  EXPECT_FALSE(exists(out + ".old"));
  EXPECT_FALSE(exists(out + ".tmp"));

  const std::string release = ckpt + "/release";
  fs::rename(release, release + ".old");
  fs::create_directories(release + ".tmp");
  write_text(release + ".tmp/meta.json", "half");
  const RunResult m = run(convert(" --loader hf --saver megatron --load-dir " + hf +
                                  " --save-dir " + ckpt));
  EXPECT_NE(m.exit_code, 0) << m.output;
  EXPECT_NE(m.output.find("restored " + release + " from " + release + ".old"), std::string::npos)
      << m.output;
  EXPECT_NE(m.output.find("already holds checkpoints (release)"), std::string::npos) << m.output;
  EXPECT_TRUE(exists(release + "/meta.json"));
  EXPECT_FALSE(exists(release + ".old"));
  EXPECT_FALSE(exists(release + ".tmp"));
}

}  // namespace convert_safety_test
}  // namespace mt::test
