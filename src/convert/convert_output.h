// The folder a conversion writes (--save-dir), held for the whole run: created
// if missing, locked (checkpoint/dir_lock.h: one writer per folder), and left
// as it was found when the conversion fails. The output itself is written into
// a working directory (checkpoint/atomic_dir.h's "<dir>.tmp": release.tmp inside
// a checkpoint folder, "<save-dir>.tmp" beside a Hugging Face folder) and moved
// into place only when complete; a failure (disk full, NaN in the weights, any
// error) removes that working directory, and --save-dir itself when this run
// created it, so nothing partial is left behind.
#pragma once
#include <string>

#include "checkpoint/dir_lock.h"

namespace mt {

// `dir` without trailing slashes, and the directory a symbolic link names (so
// that renaming it aside moves the folder, not the link).
std::string normalized_save_dir(const std::string& dir);

class ConvertOutput {
 public:
  // Creates `save_dir` if missing and locks it; throws mt::Error (naming
  // --save-dir) when it cannot be created or another run holds it.
  ConvertOutput(const std::string& save_dir, std::string work_dir);
  ~ConvertOutput();  // unless done(): the clean-up above
  ConvertOutput(const ConvertOutput&) = delete;
  ConvertOutput& operator=(const ConvertOutput&) = delete;

  void done() { done_ = true; }  // the output is in place: keep everything
  DirLock& lock() { return lock_; }
  const std::string& work_dir() const { return work_dir_; }

 private:
  std::string save_dir_, work_dir_;
  bool created_ = false;
  bool done_ = false;
  DirLock lock_;
};

}  // namespace mt
