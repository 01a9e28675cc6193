#include "cli/model_flags.h"

#include <string_view>
#include <type_traits>

namespace mt {

std::vector<std::pair<std::string, CLI::Option*>> add_model_flags(CLI::Option_group& group,
                                                                  ModelConfig& m) {
  std::vector<std::pair<std::string, CLI::Option*>> options;
  for_each_model_field(m, [&](const char* key, const char* flag, const char* help, auto& field) {
    if (*flag == '\0') return;  // set from the tokenizer or derived
    if constexpr (std::is_same_v<std::decay_t<decltype(field)>, bool>)
      options.push_back({key, group.add_flag(flag, field, help)});
    else
      options.push_back({key, group.add_option(flag, field, help)});
    // A field whose 0 means "left out" (the default derived): given, it must be > 0.
    if (std::string_view(key) == "kv_channels")
      options.back().second->check(CLI::Validator(
          [](std::string& v) -> std::string {
            if (!v.empty() && v != "0" && v.front() != '-') return "";
            return "--kv-channels " + v +
                   " must be > 0; fix: give the head size, or leave the flag out for "
                   "hidden-size / num-attention-heads";
          },
          "> 0"));
  });
  return options;
}

}  // namespace mt
