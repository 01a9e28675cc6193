#include "checkpoint/atomic_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "checkpoint/atomic_file.h"
#include "core/error.h"

namespace mt {

namespace fs = std::filesystem;

std::string tmp_dir_of(const std::string& dir) { return dir + ".tmp"; }
std::string old_dir_of(const std::string& dir) { return dir + ".old"; }

void fsync_tree(const std::string& dir) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string p = it->path().string();
    if (it->is_directory(ec)) {
      fsync_dir(p);
    } else if (it->is_regular_file(ec)) {
      const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
      MT_CHECK(fd >= 0, "cannot open '", p, "' to fsync it: ", std::strerror(errno));
      const int rc = ::fsync(fd);
      const int err = errno;
      ::close(fd);
      MT_CHECK(rc == 0, "fsync of '", p, "' failed: ", std::strerror(err),
               "; fix: check the disk and its free space");
    }
  }
  MT_CHECK(!ec, "cannot list '", dir, "' to fsync it: ", ec.message());
  fsync_dir(dir);
}

bool move_into_place(const std::string& dir) {
  const std::string tmp = tmp_dir_of(dir), old = old_dir_of(dir);
  std::error_code ec;
  const bool replacing = fs::is_directory(dir, ec);
  if (replacing) {  // keep the complete copy until the new one is in place
    fs::remove_all(old, ec);
    fs::rename(dir, old, ec);
    MT_CHECK(!ec, "cannot rename ", dir, " aside to ", old, ": ", ec.message());
  }
  fs::rename(tmp, dir, ec);
  if (ec && replacing) {  // put the previous copy back
    std::error_code back;
    fs::rename(old, dir, back);
  }
  MT_CHECK(!ec, "cannot rename ", tmp, " to ", dir, ": ", ec.message(),
           "; fix: check the permissions of ", parent_dir(dir));
  fsync_dir(parent_dir(dir));
  return replacing;
}

void remove_dir_synced(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(dir, ec))) return;
  fs::remove_all(dir, ec);
  MT_CHECK(!ec, "cannot remove ", dir, ": ", ec.message(), "; fix: remove it by hand");
  fsync_dir(parent_dir(dir));
}

std::string restore_interrupted_replace(const std::string& dir, const std::string& what) {
  const std::string old = old_dir_of(dir);
  std::error_code ec;
  if (fs::exists(dir, ec) || !fs::is_directory(old, ec)) return "";
  fs::rename(old, dir, ec);
  if (ec && fs::is_directory(dir)) return "";  // another writer restored it first
  MT_CHECK(!ec, "cannot rename ", old, " back to ", dir, ": ", ec.message(),
           "; fix: rename it by hand");
  fsync_dir(parent_dir(dir));
  return "restored " + dir + " from " + old + " (a re-" + what + " interrupted by a crash)";
}

std::vector<std::string> repair_replaced_dir(const std::string& dir, const std::string& what) {
  std::vector<std::string> done;
  if (std::string line = restore_interrupted_replace(dir, what); !line.empty())
    done.push_back(std::move(line));
  std::error_code ec;
  const std::string old = old_dir_of(dir), tmp = tmp_dir_of(dir);
  if (fs::is_directory(old, ec)) {
    remove_dir_synced(old);
    done.push_back("removed " + old + " (the previous copy of a completed re-" + what + ")");
  }
  if (fs::is_directory(tmp, ec)) {
    remove_dir_synced(tmp);
    done.push_back("removed " + tmp + " (a " + what + " interrupted by a crash; incomplete)");
  }
  return done;
}

}  // namespace mt
