// OutputGuard: outputs against inputs by path, symbolic link, hard link and
// folder containment, with the names a folder is read and written under.
#include "core/output_guard.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "../temp_dir.h"
#include "core/error.h"

namespace mt {
namespace output_guard_test {

namespace fs = std::filesystem;
using test::TempDir;

void touch(const std::string& path) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << "x";
}

// A checkpoint folder: the tracker and one iteration.
void make_checkpoint(const std::string& dir) {
  touch(dir + "/latest_checkpointed_iteration.txt");
  touch(dir + "/iter_0000010/meta.json");
  touch(dir + "/iter_0000010/mp_rank_00_000/model.safetensors");
}

std::string conflict_of_file(const std::string& out, const std::string& in) {
  OutputGuard g;
  g.reads_file("--input", in);
  g.writes_file("--output-json", out);
  return g.first_conflict();
}

TEST(OutputGuard, AFileIsTheSameFileByPathSpellingSymlinkAndHardLink) {
  TempDir d;
  touch(d.file("in.txt"));
  ASSERT_EQ(::symlink(d.file("in.txt").c_str(), d.file("soft.txt").c_str()), 0);
  ASSERT_EQ(::link(d.file("in.txt").c_str(), d.file("hard.txt").c_str()), 0);
  fs::create_directories(d.file("sub"));
  for (const std::string& out : {d.file("in.txt"), d.file("sub/../in.txt"), d.file("./in.txt"),
                                 d.file("soft.txt")}) {
    const std::string c = conflict_of_file(out, d.file("in.txt"));
    EXPECT_NE(c.find("--output-json " + out + " is the file that --input"), std::string::npos) << c;
    EXPECT_NE(c.find("fix: give --output-json a path outside"), std::string::npos) << c;
  }
  const std::string hard = conflict_of_file(d.file("hard.txt"), d.file("in.txt"));
  EXPECT_NE(hard.find("is a hard link of a file that --input"), std::string::npos) << hard;
  EXPECT_EQ(conflict_of_file(d.file("other.txt"), d.file("in.txt")), "");
  EXPECT_EQ(conflict_of_file(d.file("in.txt.json"), d.file("in.txt")), "");
  EXPECT_THROW(
      {
        OutputGuard g;
        g.reads_file("--input", d.file("in.txt"));
        g.writes_file("--output-json", d.file("soft.txt"));
        g.check();
      },
      Error);
}

TEST(OutputGuard, AFileInsideACheckpointIsRefusedOnlyUnderTheNamesItReads) {
  TempDir d;
  make_checkpoint(d.file("ck"));
  auto conflict = [&](const std::string& out) {
    OutputGuard g;
    g.reads_dir("--load", d.file("ck"), OutputGuard::checkpoint_names());
    g.writes_file("--output-json", out);
    return g.first_conflict();
  };
  for (const char* inside : {"ck/latest_checkpointed_iteration.txt", "ck/iter_0000010/meta.json",
                             "ck/iter_0000010/new.json", "ck/iter_0000020/x.json",
                             "ck/release/x.json"})
    EXPECT_NE(conflict(d.file(inside)).find("lies inside"), std::string::npos) << inside;
  EXPECT_NE(conflict(d.file("ck")).find("is the folder that --load"), std::string::npos);
  EXPECT_EQ(conflict(d.file("ck/scores.json")), "");  // beside, not inside, what is read
  EXPECT_EQ(conflict(d.file("scores.json")), "");
  // A hard link of a checkpoint file placed elsewhere.
  ASSERT_EQ(::link(d.file("ck/iter_0000010/meta.json").c_str(), d.file("meta_copy.json").c_str()), 0);
  EXPECT_NE(conflict(d.file("meta_copy.json")).find("hard link"), std::string::npos);
}

TEST(OutputGuard, FoldersOverlapByTheNamesWrittenAndRead) {
  TempDir d;
  make_checkpoint(d.file("ck"));
  touch(d.file("data/corpus_text_document.bin"));
  auto conflict = [&](const std::string& flag, const std::string& out,
                      const std::vector<std::string>& names) {
    OutputGuard g;
    g.reads_dir("--load", d.file("ck"), OutputGuard::checkpoint_names());
    g.reads_file("--data-path", d.file("data/corpus_text_document.bin"));
    g.writes_dir(flag, out, names);
    g.may_share("--save", "--load");
    return g.first_conflict();
  };
  const auto& ck = OutputGuard::checkpoint_names();
  // --save = --load is a resume; a --save inside the loaded iteration is not.
  EXPECT_EQ(conflict("--save", d.file("ck"), ck), "");
  EXPECT_EQ(conflict("--save", d.file("ck/"), ck), "");
  EXPECT_NE(conflict("--save", d.file("ck/iter_0000010"), ck).find("overlap"), std::string::npos);
  // Another flag naming the checkpoint folder itself writes there what is read.
  EXPECT_NE(conflict("--other", d.file("ck"), ck).find("is the folder that --load"), std::string::npos);
  // TensorBoard beside the checkpoint, or in a folder under it: nothing read is written.
  EXPECT_EQ(conflict("--tensorboard-dir", d.file("ck"), {"events.out.tfevents.*"}), "");
  EXPECT_EQ(conflict("--tensorboard-dir", d.file("ck/tb"), {"events.out.tfevents.*"}), "");
  // A folder written whole that holds the checkpoint or the dataset.
  EXPECT_NE(conflict("--save-dir", d.file(""), {"*"}).find("overlap"), std::string::npos);
  EXPECT_NE(conflict("--save-dir", d.file("data"), {"*"}).find("would write"), std::string::npos);
  EXPECT_EQ(conflict("--save-dir", d.file("data"), {"iter_*"}), "");
  EXPECT_NE(conflict("--save-dir", d.file("data/corpus_text_document.bin"), {"*"})
                .find("is the file that --data-path"),
            std::string::npos);
}

TEST(OutputGuard, AFlagsOwnCacheAndEmptyPathsAreNotConflicts) {
  TempDir d;
  touch(d.file("cache/blend_index_0123.bin"));
  OutputGuard g;
  g.reads_dir("--data-cache-path", d.file("cache"), {"blend_index_*"});
  g.writes_dir("--data-cache-path", d.file("cache"), {"blend_index_*"});
  g.reads_file("--vocab-file", "");
  g.writes_file("--log-json", "");
  EXPECT_EQ(g.first_conflict(), "");
  g.writes_file("--log-json", d.file("cache/blend_index_0123.bin"), /*appends=*/true);
  EXPECT_NE(g.first_conflict().find("append to"), std::string::npos) << g.first_conflict();
}

}  // namespace output_guard_test
}  // namespace mt
