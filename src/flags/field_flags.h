// The command line's side of the field lists (args/flag_table.h,
// model/config.h's for_each_model_field): each entry declared in a --help
// group, a bool member as a switch, any other member as an option taking a
// value.
#pragma once
#include <type_traits>

#include <CLI/CLI.hpp>

namespace mt {

template <class T>
CLI::Option* add_field_flag(CLI::Option_group& group, const char* names, const char* help,
                            T& field) {
  if constexpr (std::is_same_v<T, bool>)
    return group.add_flag(names, field, help);
  else
    return group.add_option(names, field, help);
}

// A visitor for the lists of args/flag_table.h: declares each flag in `group`.
inline auto declare_flags(CLI::Option_group& group) {
  return [&group](const char* names, const char* help, auto& field) {
    add_field_flag(group, names, help, field);
  };
}

}  // namespace mt
