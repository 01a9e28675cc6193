// For tests of what a full disk does: a real small file system (a tmpfs the
// test mounts; tests and CI run as root, README), and the one error line a
// failed command printed.
#pragma once
#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

namespace mt::test {

// A tmpfs of `size` mounted on `dir` for the guard's lifetime (unmounted in
// every case, also when an assertion fails).
class TmpfsMount {
 public:
  TmpfsMount(const std::string& dir, const std::string& size) : dir_(dir) {
    std::filesystem::create_directories(dir);
    ok_ = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
    if (!ok_) error_ = std::strerror(errno);
  }
  ~TmpfsMount() {
    if (ok_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }

 private:
  std::string dir_, error_;
  bool ok_ = false;
};

// The last line of `output` holding "error:" ("" if none).
inline std::string last_error_line(const std::string& output) {
  std::string line;
  for (size_t b = 0, e; b < output.size(); b = e + 1) {
    e = output.find('\n', b);
    if (e == std::string::npos) e = output.size();
    const std::string l = output.substr(b, e - b);
    if (l.find("error:") != std::string::npos) line = l;
  }
  return line;
}

}  // namespace mt::test
