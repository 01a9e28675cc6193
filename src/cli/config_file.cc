#include "cli/config_file.h"

#include <CLI/CLI.hpp>
#include <set>

#include "core/error.h"

namespace mt {

namespace {

// The file's flags, each with its values ({"--lr", "1e-3"}; a switch alone).
std::vector<std::vector<std::string>> config_file_items(const std::string& path) {
  std::vector<CLI::ConfigItem> items;
  try {
    items = CLI::ConfigTOML().from_file(path);
  } catch (const CLI::Error& e) {
    MT_FAIL("cannot read --config ", path, ": ", e.what());
  }
  std::vector<std::vector<std::string>> out;
  for (const CLI::ConfigItem& item : items) {
    if (item.name == "++" || item.name == "--") continue;  // section markers
    MT_CHECK(item.parents.empty(), "--config ", path, ": sections ([", item.parents.front(),
             "]) are not used; write `flag-name = value` lines at the top level");
    if (item.inputs.size() == 1 && item.inputs[0] == "false") continue;
    std::vector<std::string> flag{"--" + item.name};
    if (!(item.inputs.size() == 1 && item.inputs[0] == "true"))  // not a switch
      flag.insert(flag.end(), item.inputs.begin(), item.inputs.end());
    out.push_back(std::move(flag));
  }
  return out;
}

}  // namespace

std::vector<std::string> expand_config_args(int argc, char** argv) {
  std::vector<std::string> in(argv + 1, argv + argc), from_files;
  // Flags of the command line: the files' values of these are dropped (for a
  // list flag such as --data-path, two occurrences would be a repeat, refused).
  std::set<std::string> given;
  for (const std::string& a : in)
    if (a.rfind("--", 0) == 0) given.insert(a.substr(0, a.find('=')));
  auto add_file = [&](const std::string& path) {
    for (const auto& item : config_file_items(path))
      if (given.count(item[0]) == 0) from_files.insert(from_files.end(), item.begin(), item.end());
  };
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == "--config" && i + 1 < in.size())
      add_file(in[i + 1]);
    else if (in[i].rfind("--config=", 0) == 0)
      add_file(in[i].substr(9));
  }
  if (from_files.empty() || in.empty()) return in;
  std::vector<std::string> out{in[0]};  // the subcommand
  out.insert(out.end(), from_files.begin(), from_files.end());
  out.insert(out.end(), in.begin() + 1, in.end());
  return out;
}

}  // namespace mt
