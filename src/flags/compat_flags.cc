#include "flags/compat_flags.h"

#include <algorithm>

#include "args/inert_flags.h"
#include "core/error.h"

namespace mt {

std::function<std::vector<std::string>()> add_inert_megatron_flags(CLI::App& app) {
  CLI::Option_group* g = app.add_option_group(
      "accepted for Megatron-LM's scripts, without effect here (one start-up note lists them)");
  auto values = std::make_shared<std::vector<std::string>>(inert_megatron_flags().size());
  std::vector<CLI::Option*> options;
  for (size_t i = 0; i < inert_megatron_flags().size(); ++i) {
    const InertFlag& f = inert_megatron_flags()[i];
    std::string help = f.what;
    if (f.choices.size() > 1 || (f.choices.size() == 1 && f.choices[0] != "*")) {
      std::string list;
      for (const std::string& c : f.choices) list += (list.empty() ? "" : "|") + c;
      help += " (" + list + ")";
    }
    // (add_flag(name, std::string&) would bind the string as the flag's
    // target: the description is set apart.)
    options.push_back(f.choices.empty() ? g->add_flag(f.name)->description(help)
                                        : g->add_option(f.name, (*values)[i], help));
  }
  return [values, options]() {
    std::vector<std::string> given;
    for (size_t i = 0; i < options.size(); ++i) {
      if (options[i]->count() == 0) continue;
      const InertFlag& f = inert_megatron_flags()[i];
      const std::string& v = (*values)[i];
      if (f.choices.empty()) {
        given.push_back(f.name);
        continue;
      }
      if (f.choices[0] == "*") {
        const bool count = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
        MT_CHECK(count, f.name, " ", v, " is not a whole number >= 0 (Megatron reads an int); fix: "
                 "e.g. ", f.name, " 2, or leave it out (it changes nothing here)");
      } else {
        std::string list;
        for (const std::string& c : f.choices) list += (list.empty() ? "" : ", ") + c;
        MT_CHECK(std::find(f.choices.begin(), f.choices.end(), v) != f.choices.end(), f.name, " ",
                 v, " is not one of Megatron-LM's choices (", list, ")",
                 std::string(f.name) == "--num-distributed-optimizer-instances"
                     ? " here: several optimizer instances across DP are not built"
                     : "",
                 "; fix: give one of them, or leave the flag out (it changes nothing here)");
      }
      given.push_back(std::string(f.name) + " " + v);
    }
    return given;
  };
}

}  // namespace mt
