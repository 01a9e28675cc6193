#include "flags/strict_numbers.h"

#include <charconv>
#include <cstdint>
#include <string>

namespace mt {

namespace {

// Normalises `text` to plain decimal, or returns what is wrong with it.
template <typename T>
std::string strict_integer(std::string& text) {
  std::string s = text;
  if (!s.empty() && s[0] == '+') s.erase(0, 1);
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range && end == s.data() + s.size())
    return "'" + text + "' is outside the range of the flag's integer type (" +
           std::to_string(std::numeric_limits<T>::min()) + ".." +
           std::to_string(std::numeric_limits<T>::max()) + ")";
  if (s.empty() || ec != std::errc() || end != s.data() + s.size())
    return "'" + text + "' is not a decimal integer";
  text = std::to_string(v);  // "010" → "10": never octal
  return "";
}

void add_checks(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    const std::string type = o->get_type_name();
    if (type == "INT")
      o->transform(CLI::Validator(strict_integer<int64_t>, "", "decimal integer"));
    else if (type == "UINT")
      o->transform(CLI::Validator(strict_integer<uint64_t>, "", "decimal integer >= 0"));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App* s) { return s->get_name().empty(); }))
    add_checks(*sub);
}

}  // namespace

void make_integer_options_strict(CLI::App& app) { add_checks(app); }

}  // namespace mt
