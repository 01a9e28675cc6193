#include "convert/convert_output.h"

#include <filesystem>
#include <utility>

#include "core/error.h"

namespace mt {

namespace fs = std::filesystem;

std::string normalized_save_dir(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  std::error_code ec;
  if (fs::is_symlink(d, ec)) {
    const fs::path target = fs::canonical(d, ec);
    if (!ec) d = target.string();
  }
  return d;
}

ConvertOutput::ConvertOutput(const std::string& save_dir, std::string work_dir)
    : save_dir_(save_dir), work_dir_(std::move(work_dir)) {
  std::error_code ec;
  created_ = !fs::exists(save_dir_, ec);
  fs::create_directories(save_dir_, ec);
  MT_CHECK(!ec && fs::is_directory(save_dir_, ec), "cannot create --save-dir ", save_dir_, ": ",
           ec ? ec.message() : "exists and is not a directory",
           "; fix: check the path and its permissions");
  try {
    lock_ = lock_dir_or_fail(save_dir_, "--save-dir");
  } catch (...) {
    if (created_) fs::remove(save_dir_, ec);
    throw;
  }
}

ConvertOutput::~ConvertOutput() {
  if (done_) return;
  std::error_code ec;
  fs::remove_all(work_dir_, ec);
  lock_.unlock();                              // removes the lock file
  if (created_) fs::remove(save_dir_, ec);     // only if empty: never what another run put there
}

}  // namespace mt
