#include "flags/config_file.h"

#include <fstream>
#include <map>
#include <set>

#include "core/error.h"

namespace mt {

namespace {

// Flags whose value Megatron-LM takes as a Python list ("[0,1,1,1]"): a TOML
// array of them is that list.
bool takes_list_literal(const std::string& name) { return name == "moe-layer-freq"; }

std::string joined(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// The file's flags, each with its values ({"--lr", "1e-3"}; a switch alone),
// checked against the options of `sub` (null: not checked): every key must
// be one of its flags, given once, and a TOML array only where the flag takes
// several values (or a list such as --moe-layer-freq's). Keys under a section
// named for one of `commands` ([train], [plan]) are read by that command only.
std::vector<std::vector<std::string>> config_file_items(const std::string& path,
                                                        const CLI::App* sub,
                                                        const std::set<std::string>& commands) {
  std::vector<CLI::ConfigItem> items;
  try {
    items = CLI::ConfigTOML().from_file(path);
  } catch (const CLI::Error& e) {
    MT_FAIL("cannot read --config ", path, ": ", e.what());
  }
  const std::string command = sub != nullptr ? "megatron " + sub->get_name() : "";
  // CLI11 joins a key's repeats into one list; the file's own lines tell them apart.
  std::map<std::string, int> first_line;
  std::ifstream in(path);
  int at = 0;
  std::string section;  // "[plan]" while in that table: its keys are other keys
  for (std::string line; std::getline(in, line);) {
    ++at;
    const size_t b = line.find_first_not_of(" \t");
    if (b == std::string::npos || line[b] == '#') continue;
    if (line[b] == '[') {
      section = line.substr(b, line.find(']', b) + 1 - b);
      continue;
    }
    const size_t eq = line.find('=', b);
    if (eq == std::string::npos) continue;
    std::string key = line.substr(b, eq - b);
    key.erase(key.find_last_not_of(" \t") + 1);
    if (key.empty() || key.find_first_of(" \t\"'") != std::string::npos) continue;
    const auto [it, fresh] = first_line.emplace(section + key, at);
    MT_CHECK(fresh, "--config ", path, ": key '", key, "' is set twice (lines ", it->second,
             " and ", at, "); fix: keep one `", key, " = ...` line");
  }
  std::set<std::string> seen;
  std::vector<std::vector<std::string>> out;
  for (const CLI::ConfigItem& item : items) {
    if (item.name == "++" || item.name == "--") continue;  // section markers
    if (!item.parents.empty()) {
      // [train], [plan], ...: flags of that command only (`megatron config`
      // writes the cluster, which only plan takes, under [plan]).
      std::string names;
      for (const std::string& c : commands) names += (names.empty() ? "[" : "], [") + c;
      MT_CHECK(item.parents.size() == 1 && commands.count(item.parents[0]) > 0, "--config ",
               path, ": section [", joined(item.parents, "."), "] is not a command of megatron; "
               "fix: keys at the top level are read by every command, keys under ", names,
               "] by that command only");
      if (sub == nullptr || item.parents[0] != sub->get_name()) continue;
    }
    MT_CHECK(seen.insert(item.name).second, "--config ", path, ": key '", item.name,
             "' is set more than once; fix: keep one `", item.name, " = ...` line");
    const CLI::Option* option =
        sub != nullptr ? sub->get_option_no_throw("--" + item.name) : nullptr;
    if (sub != nullptr && option == nullptr) {
      std::string dashed = item.name;
      for (char& c : dashed) c = c == '_' ? '-' : c;
      const bool underscore = dashed != item.name && sub->get_option_no_throw("--" + dashed);
      MT_FAIL("--config ", path, ": key '", item.name, "' is not a flag of ", command,
              underscore ? "; fix: write it with dashes, `" + dashed + " = ...`"
                         : "; fix: remove that line or correct its name (`megatron " +
                               sub->get_name() + " --help` lists the flags)");
    }
    if (item.inputs.size() == 1 && item.inputs[0] == "false") continue;
    std::vector<std::string> flag{"--" + item.name};
    const bool many = item.inputs.size() > 1;
    if (many && takes_list_literal(item.name)) {
      flag.push_back("[" + joined(item.inputs, ",") + "]");  // Megatron's list, one value
    } else if (!(item.inputs.size() == 1 && item.inputs[0] == "true")) {  // not a switch
      MT_CHECK(!many || option == nullptr || option->get_items_expected_max() > 1, "--config ",
               path, ": key '", item.name, "' holds a list [", joined(item.inputs, ", "),
               "] but --", item.name, " takes one value; fix: write `", item.name, " = ",
               item.inputs.front(), "` (one value)");
      flag.insert(flag.end(), item.inputs.begin(), item.inputs.end());
    }
    out.push_back(std::move(flag));
  }
  return out;
}

}  // namespace

std::vector<std::string> expand_config_args(int argc, char** argv, const CLI::App& app) {
  std::vector<std::string> in(argv + 1, argv + argc), from_files;
  const CLI::App* sub = nullptr;
  if (!in.empty()) {
    for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; }))
      if (s->get_name() == in[0]) sub = s;
  }
  // Flags of the command line: the files' values of these are dropped (for a
  // list flag such as --data-path, two occurrences would be a repeat, refused).
  std::set<std::string> given;
  for (const std::string& a : in)
    if (a.rfind("--", 0) == 0) given.insert(a.substr(0, a.find('=')));
  const std::set<std::string> commands(kMegatronCommands.begin(), kMegatronCommands.end());
  auto add_file = [&](const std::string& path) {
    for (const auto& item : config_file_items(path, sub, commands))
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
