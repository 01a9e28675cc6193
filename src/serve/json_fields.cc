#include "serve/json_fields.h"

#include <cmath>
#include <sstream>

#include "serve/api_error.h"

namespace mt::serve {

namespace {
[[noreturn]] void wrong_type(const char* name, const char* expected, const Json& v) {
  throw ApiError(400, std::string("Invalid type for '") + name + "': expected " + expected +
                          ", but got " + json_kind(v) + " instead.", name);
}
std::string number_text(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}
}  // namespace

std::string json_kind(const Json& v) {
  switch (v.type()) {
    case Json::value_t::string: return "a string";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    case Json::value_t::number_float: return "a decimal";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    default: return "null";
  }
}

const Json* field(const Json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<int64_t> int_field(const Json& body, const char* name, int64_t lo, int64_t hi) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) wrong_type(name, "an integer", *v);
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX))
    throw ApiError(400, std::string("Invalid '") + name + "': integer above maximum value. " +
                            "Expected a value <= " + std::to_string(hi) + ".", name);
  const int64_t x = v->get<int64_t>();
  if (x < lo)
    throw ApiError(400, std::string("Invalid '") + name + "': integer below minimum value. " +
                            "Expected a value >= " + std::to_string(lo) + ", but got " +
                            std::to_string(x) + " instead.", name);
  if (x > hi)
    throw ApiError(400, std::string("Invalid '") + name + "': integer above maximum value. " +
                            "Expected a value <= " + std::to_string(hi) + ", but got " +
                            std::to_string(x) + " instead.", name);
  return x;
}

std::optional<double> number_field(const Json& body, const char* name, double lo, double hi) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) wrong_type(name, "a number", *v);
  const double x = v->get<double>();
  if (!(x >= lo))
    throw ApiError(400, std::string("Invalid '") + name + "': decimal below minimum value. " +
                            "Expected a value >= " + number_text(lo) + ", but got " +
                            number_text(x) + " instead.", name);
  if (!(x <= hi))
    throw ApiError(400, std::string("Invalid '") + name + "': decimal above maximum value. " +
                            "Expected a value <= " + number_text(hi) + ", but got " +
                            number_text(x) + " instead.", name);
  return x;
}

std::optional<bool> bool_field(const Json& body, const char* name) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) wrong_type(name, "a boolean", *v);
  return v->get<bool>();
}

std::optional<std::string> string_field(const Json& body, const char* name) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) wrong_type(name, "a string", *v);
  return v->get<std::string>();
}

}  // namespace mt::serve
