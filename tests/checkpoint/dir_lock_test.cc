// checkpoint/dir_lock.h: one writer per folder. flock(2) belongs to the open
// file description, so two DirLocks in one process conflict as two processes
// do; a forked child shows that the kernel drops the lock of a holder that dies.
#include "checkpoint/dir_lock.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "temp_dir.h"

namespace mt {
namespace dir_lock_test {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(DirLock, ASecondLockOfTheFolderIsRefusedUntilTheFirstIsReleased) {
  test::TempDir dir;
  const std::string d = dir.file("save");
  fs::create_directories(d);
  DirLock a;
  std::string detail;
  ASSERT_EQ(a.try_lock(d, &detail), DirLock::Outcome::kLocked);
  EXPECT_TRUE(a.locked());
  EXPECT_EQ(a.path(), d + "/" + kDirLockFile);
  const std::string record = read_file(a.path());
  EXPECT_EQ(record.rfind("host ", 0), 0u) << record;
  EXPECT_NE(record.find(" pid " + std::to_string(::getpid()) + " started "), std::string::npos)
      << record;

  DirLock b;  // another open file description: conflicts like another process
  EXPECT_EQ(b.try_lock(d, &detail), DirLock::Outcome::kBusy);
  EXPECT_FALSE(b.locked());
  EXPECT_EQ(detail + "\n", record);
  try {
    lock_dir_or_fail(d, "--save");
    ADD_FAILURE() << "a second lock_dir_or_fail succeeded";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--save " + d + " is in use by another megatron run (" + detail),
              std::string::npos) << m;
    EXPECT_NE(m.find("fix: wait for that run to end, stop it, or pass another --save"),
              std::string::npos) << m;
  }

  a.unlock();  // removes the file: a finished run leaves nothing behind
  EXPECT_FALSE(fs::exists(d + "/" + kDirLockFile));
  EXPECT_EQ(b.try_lock(d, &detail), DirLock::Outcome::kLocked);
  DirLock moved = std::move(b);  // the lock moves with the object
  EXPECT_TRUE(moved.locked());
  EXPECT_FALSE(b.locked());
  EXPECT_EQ(a.try_lock(d, &detail), DirLock::Outcome::kBusy);
}

TEST(DirLock, AStaleLockFileOfADeadHolderDoesNotBlock) {
  test::TempDir dir;
  const std::string d = dir.file("save");
  fs::create_directories(d);
  std::ofstream(d + "/" + kDirLockFile) << "host gone pid 1 started 2000-01-01 00:00:00\n";
  DirLock lock;
  std::string detail;
  ASSERT_EQ(lock.try_lock(d, &detail), DirLock::Outcome::kLocked);
  const std::string record = read_file(lock.path());
  EXPECT_NE(record.find(" pid " + std::to_string(::getpid()) + " "), std::string::npos) << record;
  EXPECT_EQ(record.find("gone"), std::string::npos) << "the old record stayed: " << record;
}

TEST(DirLock, TheKernelReleasesTheLockOfAHolderThatIsKilled) {
  test::TempDir dir;
  const std::string d = dir.file("save");
  fs::create_directories(d);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the holder: locks, says so, waits to be killed
    DirLock held;
    std::string unused;
    const char ok = held.try_lock(d, &unused) == DirLock::Outcome::kLocked ? '1' : '0';
    if (::write(ready[1], &ok, 1) != 1) ::_exit(2);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(ok, '1');

  DirLock lock;
  std::string detail;
  EXPECT_EQ(lock.try_lock(d, &detail), DirLock::Outcome::kBusy);
  EXPECT_NE(detail.find(" pid " + std::to_string(child) + " "), std::string::npos) << detail;

  ::kill(child, SIGKILL);  // no destructor runs: the file stays, the lock goes
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(fs::exists(d + "/" + kDirLockFile));
  EXPECT_EQ(lock.try_lock(d, &detail), DirLock::Outcome::kLocked);
}

TEST(DirLock, AMissingFolderIsAnErrorNamingTheLockFile) {
  test::TempDir dir;
  DirLock lock;
  std::string detail;
  try {
    lock.try_lock(dir.file("nowhere"), &detail);
    ADD_FAILURE() << "locked a folder that does not exist";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("nowhere") + "/" + kDirLockFile),
              std::string::npos) << e.what();
  }
  EXPECT_FALSE(lock.locked());
}

}  // namespace dir_lock_test
}  // namespace mt
