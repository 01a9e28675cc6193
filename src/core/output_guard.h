// Nothing a command writes may destroy what it reads. Each subcommand names,
// by flag, the files and folders it reads and those it writes; check() compares
// every output with every input by resolved identity — the real path (symbolic
// links followed), a path inside a folder, and the inode (hard links) — and
// refuses, in one line naming both flags and a fix, an output that would
// replace, append to or write into an input. Run it before anything is
// created or written.
//
// A folder is described by the names of its entries that matter, as shell
// patterns of the first path component under it ("*": all of it): a
// checkpoint is read as {"latest_checkpointed_iteration.txt", "iter_*",
// "release*"}, so a
// --tensorboard-dir beside them in the same folder writes nothing that is read,
// while an --output-json inside iter_0000010/ would replace a checkpoint file.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace mt {

class OutputGuard {
 public:
  // Names of a checkpoint folder that loading reads and saving writes.
  static const std::vector<std::string>& checkpoint_names();

  // A file the command reads (empty path: none).
  void reads_file(std::string flag, std::string path);
  // A file, or a folder read whole, whichever `path` is (--tokenizer-model).
  void reads_file_or_dir(std::string flag, std::string path);
  // A folder the command reads: the entries matching `names` and all below them.
  void reads_dir(std::string flag, std::string path, std::vector<std::string> names = {"*"});
  // A file the command creates or replaces (appends: adds to it in place).
  void writes_file(std::string flag, std::string path, bool appends = false);
  // A folder the command writes into: the entries matching `names`.
  void writes_dir(std::string flag, std::string path, std::vector<std::string> names = {"*"});
  // `out_flag` may name the very folder `in_flag` reads (train's --save = --load:
  // a resume saves its new iterations beside the one it loaded).
  void may_share(std::string out_flag, std::string in_flag);

  // The first output that would overwrite, append to or write into an input,
  // as one line with the fix; "" when none does.
  std::string first_conflict() const;
  // Throws mt::Error with first_conflict() when there is one.
  void check() const;

 private:
  struct Entry {
    std::string flag, path;
    bool dir = false, appends = false;
    std::vector<std::string> names;  // dir: the entries read or written
  };
  std::string conflict(const Entry& out, const Entry& in) const;

  std::vector<Entry> inputs_, outputs_;
  std::vector<std::pair<std::string, std::string>> shared_;
};

}  // namespace mt
