// One writer per checkpoint folder. Two runs saving into one --save (a double
// submit, a requeue while the old job lives, ranks orphaned by a killed
// mpirun) would replace each other's iterations and both exit 0; two converts
// into one --save-dir would leave a mix of both. A writer therefore holds an
// exclusive flock(2) on <dir>/.megatron.lock for its whole run, and a second
// one is refused at start-up with the holder's host, pid and start time.
//
// flock belongs to the open file description, so the kernel drops it when
// the holder dies however it dies (SIGKILL, OOM, node reboot for a local
// disk): a lock file left behind by a dead run never blocks the next one. The
// file is opened O_CLOEXEC (a child that execs does not inherit the lock) and
// removed on unlock, so a finished run leaves no trace; a taker checks after
// flock that the path still names the file it locked (it may have locked a
// file its holder had just removed) and retries otherwise.
//
// Filesystems without flock (ENOLCK, EOPNOTSUPP, ENOSYS: e.g. Lustre mounted
// without -o flock) cannot be locked: the caller warns and goes on unlocked.
// NFS emulates flock with byte-range locks that every client sees.
#pragma once
#include <string>

namespace mt {

inline constexpr const char* kDirLockFile = ".megatron.lock";

class DirLock {
 public:
  enum class Outcome {
    kLocked,       // this object holds the lock until unlock() or destruction
    kBusy,         // another open file description holds it; *detail: its record
    kUnsupported,  // the filesystem has no flock; *detail: the system's reason
  };

  DirLock() = default;
  ~DirLock() { unlock(); }
  DirLock(DirLock&& other) noexcept;
  DirLock& operator=(DirLock&& other) noexcept;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

  // Tries once, without waiting, to lock the existing directory `dir`. On
  // kLocked writes "host H pid P started T" into the lock file; on kBusy
  // *detail is the holder's line ("" if it has not written it yet). Throws
  // mt::Error naming the lock file when it cannot be opened (no such
  // directory, permission).
  Outcome try_lock(const std::string& dir, std::string* detail);

  // Removes the lock file and releases the lock (nothing if not held).
  void unlock() noexcept;

  // The locked directory was renamed to `dir` (its lock file with it): unlock()
  // then removes the file there, never a lock file another run made at the old path.
  void moved_to(const std::string& dir);

  bool locked() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }  // <dir>/.megatron.lock once tried

 private:
  int fd_ = -1;
  std::string path_;
};

// The one-line refusal: "<flag> <dir> is in use by another megatron run
// (host H, pid P, started T); ...; fix: wait for it to end, stop it, or pass
// another <flag>".
std::string dir_in_use_message(const std::string& flag, const std::string& dir,
                               const std::string& holder);

// For one process (convert; train's rank 0): creates nothing, locks `dir`
// (which must exist) for the caller's lifetime of the result. Throws mt::Error
// with dir_in_use_message when another process holds it; where the filesystem
// has no flock, says so once on stderr and returns an unlocked DirLock.
DirLock lock_dir_or_fail(const std::string& dir, const std::string& flag);

}  // namespace mt
