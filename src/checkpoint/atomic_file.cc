#include "checkpoint/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace mt {
namespace {

std::string errno_str(int err) { return std::string(std::strerror(err)); }

}  // namespace

std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void fsync_dir(const std::string& dir) {
  const std::string d = dir.empty() ? "." : dir;
  const int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  MT_CHECK(fd >= 0, "cannot open directory '", d, "' to fsync it: ", errno_str(errno),
           "; fix: check that the directory exists and is readable");
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some file systems (e.g. certain network mounts) refuse fsync on a
  // directory with EINVAL; the rename itself has happened, so accept that.
  MT_CHECK(rc == 0 || err == EINVAL, "fsync of directory '", d, "' failed: ", errno_str(err));
}

AtomicFileWriter::AtomicFileWriter(const std::string& path)
    : path_(path), tmp_path_(path + ".tmp") {
  MT_CHECK(!path.empty(), "AtomicFileWriter: empty path; fix: pass the file to write");
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  MT_CHECK(fd_ >= 0, "cannot create '", tmp_path_, "' (to write '", path_, "'): ", errno_str(errno),
           "; fix: check that the directory exists, is writable and has free space");
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) discard();
}

void AtomicFileWriter::discard() noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  ::unlink(tmp_path_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t bytes) {
  MT_CHECK(fd_ >= 0 && !committed_, "write to '", path_, "' after commit or failure");
  const char* p = static_cast<const char*>(data);
  size_t left = bytes;
  while (left > 0) {
    // Linux writes at most ~2 GiB per call; ask for no more than 1 GiB.
    const size_t chunk = left < (size_t(1) << 30) ? left : (size_t(1) << 30);
    const ssize_t n = ::write(fd_, p, chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;  // write() returning 0 means no space
      discard();
      MT_FAIL("writing '", path_, "' failed after ", written_, " bytes: ", errno_str(err),
              "; fix: free disk space or choose another directory (nothing was replaced)");
    }
    p += n;
    left -= size_t(n);
    written_ += size_t(n);
  }
}

void AtomicFileWriter::commit() {
  MT_CHECK(fd_ >= 0 && !committed_, "commit of '", path_, "' twice or after a failure");
  if (::fsync(fd_) != 0) {
    const int err = errno;
    discard();
    MT_FAIL("fsync of '", tmp_path_, "' failed: ", errno_str(err),
            "; fix: check the disk (nothing was replaced)");
  }
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) {
    const int err = errno;
    discard();
    MT_FAIL("closing '", tmp_path_, "' failed: ", errno_str(err),
            "; fix: check free space on the disk (nothing was replaced)");
  }
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    discard();
    MT_FAIL("renaming '", tmp_path_, "' to '", path_, "' failed: ", errno_str(err),
            "; fix: check that '", path_, "' is not a directory and is writable");
  }
  committed_ = true;
  fsync_dir(parent_dir(path_));
}

void atomic_write_text(const std::string& path, const std::string& content) {
  AtomicFileWriter w(path);
  w.write(content.data(), content.size());
  w.commit();
}

std::string read_text_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  MT_CHECK(f != nullptr, "cannot open '", path, "': ", errno_str(errno));
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  MT_CHECK(!bad, "error reading '", path, "'");
  return out;
}

}  // namespace mt
