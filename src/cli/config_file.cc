#include "cli/config_file.h"

#include <CLI/CLI.hpp>

#include "core/error.h"

namespace mt {

std::vector<std::string> config_file_args(const std::string& path) {
  std::vector<CLI::ConfigItem> items;
  try {
    items = CLI::ConfigTOML().from_file(path);
  } catch (const CLI::Error& e) {
    MT_FAIL("cannot read --config ", path, ": ", e.what());
  }
  std::vector<std::string> args;
  for (const CLI::ConfigItem& item : items) {
    if (item.name == "++" || item.name == "--") continue;  // section markers
    MT_CHECK(item.parents.empty(), "--config ", path, ": sections ([", item.parents.front(),
             "]) are not used; write `flag-name = value` lines at the top level");
    if (item.inputs.size() == 1 && item.inputs[0] == "true") {  // a switch
      args.push_back("--" + item.name);
      continue;
    }
    if (item.inputs.size() == 1 && item.inputs[0] == "false") continue;
    args.push_back("--" + item.name);
    for (const std::string& v : item.inputs) args.push_back(v);
  }
  return args;
}

std::vector<std::string> expand_config_args(int argc, char** argv) {
  std::vector<std::string> in(argv + 1, argv + argc), from_files;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == "--config" && i + 1 < in.size()) {
      const auto more = config_file_args(in[i + 1]);
      from_files.insert(from_files.end(), more.begin(), more.end());
    } else if (in[i].rfind("--config=", 0) == 0) {
      const auto more = config_file_args(in[i].substr(9));
      from_files.insert(from_files.end(), more.begin(), more.end());
    }
  }
  if (from_files.empty() || in.empty()) return in;
  std::vector<std::string> out{in[0]};  // the subcommand
  out.insert(out.end(), from_files.begin(), from_files.end());
  out.insert(out.end(), in.begin() + 1, in.end());
  return out;
}

}  // namespace mt
