// checkpoint/atomic_dir.h: a directory is replaced by rename-aside, and each
// state a crash can leave is repaired to a complete copy; a lock moves with
// the directory it locks (DirLock::moved_to).
#include "checkpoint/atomic_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/dir_lock.h"
#include "temp_dir.h"

namespace mt {
namespace atomic_dir_test {

namespace fs = std::filesystem;

void put(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

std::string get(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(AtomicDir, ReplacesByRenameAsideAndRepairsEachCrashState) {
  test::TempDir t;
  const std::string d = t.file("model");
  put(tmp_dir_of(d) + "/w", "first");
  fsync_tree(tmp_dir_of(d));
  EXPECT_FALSE(move_into_place(d));  // nothing to replace
  EXPECT_EQ(get(d + "/w"), "first");

  put(tmp_dir_of(d) + "/w", "second");
  EXPECT_TRUE(move_into_place(d));
  EXPECT_EQ(get(d + "/w"), "second");
  EXPECT_EQ(get(old_dir_of(d) + "/w"), "first");  // kept until the caller removes it
  remove_dir_synced(old_dir_of(d));
  EXPECT_FALSE(fs::exists(old_dir_of(d)));

  // Killed between the renames: <d>.old and no <d>; restored before anything else.
  fs::rename(d, old_dir_of(d));
  put(tmp_dir_of(d) + "/w", "half");
  EXPECT_EQ(restore_interrupted_replace(d, "conversion"),
            "restored " + d + " from " + d + ".old (a re-conversion interrupted by a crash)");
  EXPECT_EQ(get(d + "/w"), "second");
  EXPECT_EQ(restore_interrupted_replace(d, "conversion"), "");
  // Killed before the old copy was removed, with a stale working directory.
  put(old_dir_of(d) + "/w", "first");
  const std::vector<std::string> done = repair_replaced_dir(d, "save");
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0], "removed " + d + ".old (the previous copy of a completed re-save)");
  EXPECT_EQ(done[1], "removed " + d + ".tmp (a save interrupted by a crash; incomplete)");
  EXPECT_EQ(get(d + "/w"), "second");
  EXPECT_TRUE(repair_replaced_dir(d, "save").empty());
}

TEST(AtomicDir, ALockMovesWithItsDirectoryAndLeavesNoFileBehind) {
  test::TempDir t;
  const std::string d = t.file("model");
  fs::create_directories(d);
  DirLock lock;
  std::string detail;
  ASSERT_EQ(lock.try_lock(d, &detail), DirLock::Outcome::kLocked);
  put(tmp_dir_of(d) + "/w", "new");
  ASSERT_TRUE(move_into_place(d));
  lock.moved_to(old_dir_of(d));
  EXPECT_EQ(lock.path(), old_dir_of(d) + "/" + kDirLockFile);
  DirLock other;  // the new copy is free
  EXPECT_EQ(other.try_lock(d, &detail), DirLock::Outcome::kLocked);
  lock.unlock();
  EXPECT_TRUE(fs::exists(d + "/" + kDirLockFile)) << "unlock removed the other run's lock file";
  EXPECT_FALSE(fs::exists(old_dir_of(d) + "/" + kDirLockFile));
}

}  // namespace atomic_dir_test
}  // namespace mt
