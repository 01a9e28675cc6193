#include "core/output_guard.h"

#include <fnmatch.h>
#include <sys/stat.h>

#include <filesystem>
#include <optional>
#include <set>

#include "core/error.h"

namespace mt {

namespace fs = std::filesystem;

namespace {

using Inode = std::pair<dev_t, ino_t>;

// The path as the kernel will reach it: absolute, symbolic links of its
// existing part followed (a link as the last component too), the rest
// normalized lexically.
std::string resolve(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) p = fs::absolute(path, ec).lexically_normal();
  std::string s = p.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::optional<Inode> inode_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return Inode{st.st_dev, st.st_ino};
}

// The first component of `path` below `root` ("" when path is root itself);
// nullopt when path is not root or below it.
std::optional<std::string> component_below(const std::string& path, const std::string& root) {
  if (path == root) return std::string();
  const std::string prefix = root == "/" ? root : root + "/";
  if (path.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  const std::string rest = path.substr(prefix.size());
  return rest.substr(0, rest.find('/'));
}

bool matches(const std::vector<std::string>& patterns, const std::string& name) {
  for (const std::string& p : patterns)
    if (::fnmatch(p.c_str(), name.c_str(), FNM_PERIOD) == 0 || p == "*") return true;
  return false;
}

// Whether an entry name could match a pattern of both lists (approximate for
// two different wildcards: each is tried as a name against the other).
bool patterns_overlap(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  for (const std::string& x : a)
    for (const std::string& y : b)
      if (x == "*" || y == "*" || x == y || ::fnmatch(x.c_str(), y.c_str(), 0) == 0 ||
          ::fnmatch(y.c_str(), x.c_str(), 0) == 0)
        return true;
  return false;
}

std::string names_text(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + (n == "*" ? "everything" : n);
  return s;
}

// The regular files of a folder entry set (all below each matching entry),
// for hard links; bounded so a huge folder cannot stall start-up.
std::set<Inode> inodes_below(const std::string& dir, const std::vector<std::string>& names) {
  std::set<Inode> out;
  std::error_code ec;
  constexpr size_t kMaxFiles = 200000;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!matches(names, it->path().filename().string())) continue;
    if (auto ino = inode_of(it->path().string())) out.insert(*ino);
    if (!it->is_directory(ec)) continue;
    for (fs::recursive_directory_iterator r(it->path(), fs::directory_options::skip_permission_denied, ec), rend;
         !ec && r != rend && out.size() < kMaxFiles; r.increment(ec))
      if (auto ino = inode_of(r->path().string())) out.insert(*ino);
  }
  return out;
}

std::set<Inode> inodes_of(bool dir, const std::string& path, const std::vector<std::string>& names) {
  if (dir) return inodes_below(path, names);
  std::set<Inode> out;
  if (auto ino = inode_of(path)) out.insert(*ino);
  return out;
}

}  // namespace

const std::vector<std::string>& OutputGuard::checkpoint_names() {
  static const std::vector<std::string> names{"latest_checkpointed_iteration.txt", "iter_*",
                                              "release*"};
  return names;
}

void OutputGuard::reads_file(std::string flag, std::string path) {
  if (!path.empty()) inputs_.push_back({std::move(flag), std::move(path), false, false, {}});
}

void OutputGuard::reads_file_or_dir(std::string flag, std::string path) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    reads_dir(std::move(flag), std::move(path));
  else
    reads_file(std::move(flag), std::move(path));
}

void OutputGuard::reads_dir(std::string flag, std::string path, std::vector<std::string> names) {
  if (!path.empty()) inputs_.push_back({std::move(flag), std::move(path), true, false, std::move(names)});
}

void OutputGuard::writes_file(std::string flag, std::string path, bool appends) {
  if (!path.empty()) outputs_.push_back({std::move(flag), std::move(path), false, appends, {}});
}

void OutputGuard::writes_dir(std::string flag, std::string path, std::vector<std::string> names) {
  if (!path.empty()) outputs_.push_back({std::move(flag), std::move(path), true, false, std::move(names)});
}

void OutputGuard::may_share(std::string out_flag, std::string in_flag) {
  shared_.emplace_back(std::move(out_flag), std::move(in_flag));
}

std::string OutputGuard::conflict(const Entry& out, const Entry& in) const {
  const std::string o = resolve(out.path), i = resolve(in.path);
  const std::string outs = out.flag + " " + out.path, ins = in.flag + " " + in.path;
  const std::string fix = "; fix: give " + out.flag + " a path outside what " + in.flag + " reads";
  if (out.dir && in.dir && o == i)
    for (const auto& [f, g] : shared_)
      if (f == out.flag && g == in.flag) return "";
  std::error_code ec;
  if (in.dir && fs::exists(i, ec) && !fs::is_directory(i, ec)) return "";  // nothing read below a file
  const char* verb = out.appends ? "append to" : "replace";
  if (!out.dir && !in.dir) {
    if (o == i) return outs + " is the file that " + ins + " reads; writing it would " + verb + " it" + fix;
  } else if (!out.dir) {  // a file written, a folder read
    if (o == i) return outs + " is the folder that " + ins + " reads" + fix;
    const auto c = component_below(o, i);
    if (c && matches(in.names, *c))
      return outs + " lies inside " + in.path + ", which " + in.flag + " reads (" +
             names_text(in.names) + "); writing it would " + verb + " part of it" + fix;
  } else if (!in.dir) {  // a folder written, a file read
    if (o == i) return outs + " is the file that " + ins + " reads" + fix;
    const auto c = component_below(i, o);
    if (c && matches(out.names, *c))
      return outs + " would write " + in.path + " (" + names_text(out.names) + " in that folder), "
             "which " + in.flag + " reads" + fix;
  } else {  // two folders
    const auto below_in = component_below(o, i), below_out = component_below(i, o);
    const bool overlap = o == i ? patterns_overlap(out.names, in.names)
                         : below_in ? matches(in.names, *below_in)
                         : below_out ? matches(out.names, *below_out)
                                     : false;
    if (overlap)
      return outs + (o == i ? " is the folder that " + ins + " reads"
                            : " and " + ins + " overlap") +
             ": " + out.flag + " writes " + names_text(out.names) + " there, " + in.flag +
             " reads " + names_text(in.names) + fix;
  }
  // Hard links: a file the output would write that is a file the input reads.
  const std::set<Inode> written = inodes_of(out.dir, o, out.names);
  if (written.empty()) return "";
  for (const Inode& ino : inodes_of(in.dir, i, in.names))
    if (written.count(ino) > 0)
      return outs + (out.dir ? " holds a hard link of a file that " : " is a hard link of a file that ") +
             ins + " reads; writing it would " + verb + " that file" + fix;
  return "";
}

std::string OutputGuard::first_conflict() const {
  for (const Entry& out : outputs_)
    for (const Entry& in : inputs_) {
      if (out.flag == in.flag) continue;  // one flag's own cache, read and rewritten
      std::string c = conflict(out, in);
      if (!c.empty()) return c;
    }
  return "";
}

void OutputGuard::check() const {
  const std::string c = first_conflict();
  MT_CHECK(c.empty(), c);
}

}  // namespace mt
