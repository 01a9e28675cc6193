// Typed reads of a request's optional JSON fields, refusing a wrong type or
// a value out of range with OpenAI's wording ("Invalid type for 'top_p':
// expected a number, but got a string instead.") as a 400 ApiError naming
// the field (serve/api_error.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace mt::serve {

using Json = nlohmann::ordered_json;

// The field, or nothing when absent or null.
const Json* field(const Json& body, const char* name);
std::optional<int64_t> int_field(const Json& body, const char* name, int64_t lo, int64_t hi);
std::optional<double> number_field(const Json& body, const char* name, double lo, double hi);
std::optional<bool> bool_field(const Json& body, const char* name);
std::optional<std::string> string_field(const Json& body, const char* name);
// "a string", "an integer", ... for messages.
std::string json_kind(const Json& v);

}  // namespace mt::serve
