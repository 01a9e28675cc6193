#include "checkpoint/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <thread>
#include <utility>

#include "core/error.h"

namespace mt {

namespace {

// "host H pid P started YYYY-MM-DD HH:MM:SS" (local time): what a refused
// run prints, so that a person can find and judge the holder.
std::string holder_record() {
  char host[256] = "?";
  if (::gethostname(host, sizeof host) != 0) std::strcpy(host, "?");
  host[sizeof host - 1] = '\0';
  char when[32] = "?";
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  if (::localtime_r(&now, &tm) != nullptr)
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
  return std::string("host ") + host + " pid " + std::to_string(::getpid()) + " started " + when;
}

// The holder's record, read through our own descriptor of the same file. The
// holder writes it just after taking the lock, so an empty file means it is
// starting: look again for up to half a second.
std::string read_record(int fd) {
  std::string line;
  for (int i = 0; i < 25; ++i) {
    char buf[512];
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    if (n > 0) {
      line.assign(buf, size_t(n));
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  while (!line.empty() && (line.back() == '\n' || line.back() == '\0')) line.pop_back();
  return line;
}

bool no_flock_here(int err) { return err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS; }

}  // namespace

DirLock::DirLock(DirLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

DirLock& DirLock::operator=(DirLock&& other) noexcept {
  if (this != &other) {
    unlock();
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

DirLock::Outcome DirLock::try_lock(const std::string& dir, std::string* detail) {
  unlock();
  path_ = dir + "/" + kDirLockFile;
  for (int attempt = 0;; ++attempt) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    MT_CHECK(fd >= 0, "cannot open the lock file ", path_, ": ", std::strerror(errno),
             "; fix: check that ", dir, " exists and is writable");
    int rc;
    do rc = ::flock(fd, LOCK_EX | LOCK_NB);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      const int err = errno;
      if (err == EWOULDBLOCK) {
        *detail = read_record(fd);
        ::close(fd);
        return Outcome::kBusy;
      }
      ::close(fd);
      if (no_flock_here(err)) {
        ::unlink(path_.c_str());  // nobody can lock it here; leave no file behind
        *detail = std::strerror(err);
        return Outcome::kUnsupported;
      }
      MT_FAIL("cannot lock ", path_, ": ", std::strerror(err));
    }
    // The path must still name the file we locked: a holder removes it on
    // unlock, and we may have opened it just before that.
    struct stat held{}, named{};
    if (::fstat(fd, &held) == 0 && ::stat(path_.c_str(), &named) == 0 &&
        held.st_dev == named.st_dev && held.st_ino == named.st_ino) {
      const std::string record = holder_record() + "\n";
      // Best effort: the lock holds whether or not the record is written.
      const bool written = ::ftruncate(fd, 0) == 0 &&
                           ::pwrite(fd, record.data(), record.size(), 0) == ssize_t(record.size());
      (void)written;
      fd_ = fd;
      return Outcome::kLocked;
    }
    ::close(fd);
    MT_CHECK(attempt < 1000, "cannot lock ", path_, ": it is replaced faster than it can be "
             "locked (another process keeps removing it); fix: stop the other writer");
  }
}

void DirLock::unlock() noexcept {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // still holding it: a taker that opened it re-checks the path
  ::close(fd_);
  fd_ = -1;
}

void DirLock::moved_to(const std::string& dir) {
  if (fd_ >= 0) path_ = dir + "/" + kDirLockFile;
}

std::string dir_in_use_message(const std::string& flag, const std::string& dir,
                               const std::string& holder) {
  return flag + " " + dir + " is in use by another megatron run (" +
         (holder.empty() ? std::string("its lock file names no holder yet: a run starting, or "
                                     "another program")
                         : holder) +
         ", holding " + dir + "/" + kDirLockFile + "); two runs writing into one folder would "
         "replace each other's checkpoints; fix: wait for that run to end, stop it, or pass "
         "another " + flag;
}

DirLock lock_dir_or_fail(const std::string& dir, const std::string& flag) {
  DirLock lock;
  std::string detail;
  switch (lock.try_lock(dir, &detail)) {
    case DirLock::Outcome::kLocked:
      break;
    case DirLock::Outcome::kBusy:
      MT_FAIL(dir_in_use_message(flag, dir, detail));
    case DirLock::Outcome::kUnsupported:
      std::fprintf(stderr, "warning: %s %s cannot be locked (%s: the filesystem has no "
                   "flock), so nothing stops a second run from writing into it at the same "
                   "time; make sure only one does\n", flag.c_str(), dir.c_str(), detail.c_str());
      break;
  }
  return lock;
}

}  // namespace mt
