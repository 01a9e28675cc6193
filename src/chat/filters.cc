// The filters (`value | name(args)`).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "chat/builtins.h"
#include "chat/error.h"
#include "chat/text.h"

namespace mt::chat {
namespace {

// Positional argument k, else keyword `key`, else `fallback`.
Value param(const Array& args, const KwArgs& kwargs, size_t k, const char* key, Value fallback) {
  if (k < args.size()) return args[k];
  for (const auto& [name, v] : kwargs)
    if (name == key) return v;
  return fallback;
}

[[noreturn]] void bad_operand(const std::string& filter, const Value& v, int line) {
  template_fail("filter '" + filter + "' cannot take " + v.described(), line);
}

Value select_items(const std::string& name, const Value& v, const Array& args, int line) {
  if (!v.is_array()) bad_operand(name, v, line);
  const bool by_attr = name == "selectattr" || name == "rejectattr";
  const bool keep = name == "select" || name == "selectattr";
  size_t k = 0;
  std::string attr;
  if (by_attr) {
    if (args.empty() || !args[0].is_string()) template_fail("filter '" + name + "' needs an attribute name", line);
    attr = args[k++].s;
  }
  std::string test;
  if (k < args.size()) {
    if (!args[k].is_string()) template_fail("filter '" + name + "' needs a test name", line);
    test = args[k++].s;
    if (!is_known_test(test)) template_fail("unsupported test '" + test + "' in filter '" + name + "'", line);
  }
  const Array rest(args.begin() + static_cast<long>(k), args.end());
  Array out;
  for (const Value& item : *v.arr) {
    const Value x = by_attr ? get_attribute(item, attr) : item;
    const bool pass = test.empty() ? x.truthy() : apply_test(test, x, rest, line);
    if (pass == keep) out.push_back(item);
  }
  return Value::array(std::move(out));
}

Value indent(const Value& v, const Array& args, const KwArgs& kwargs, int line) {
  if (!v.is_string()) bad_operand("indent", v, line);
  const Value width = param(args, kwargs, 0, "width", Value::integer(4));
  const bool first = param(args, kwargs, 1, "first", Value::boolean(false)).truthy();
  const bool blank = param(args, kwargs, 2, "blank", Value::boolean(false)).truthy();
  const std::string pad = width.is_string() ? width.s : std::string(static_cast<size_t>(std::max<int64_t>(0, width.i)), ' ');
  std::string out;
  size_t start = 0;
  for (int n = 0;; ++n) {
    const size_t nl = v.s.find('\n', start);
    const std::string line_text = v.s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if ((n > 0 || first) && (blank || !line_text.empty())) out += pad;
    out += line_text;
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
  }
  return Value::string(out);
}

}  // namespace

void check_filter_kwargs(const std::string& name, const std::vector<std::string>& keys, int line) {
  static const std::map<std::string, std::set<std::string>> allowed = {
      {"default", {"default_value", "boolean"}}, {"d", {"default_value", "boolean"}},
      {"tojson", {"indent", "ensure_ascii"}},    {"join", {"d"}},
      {"map", {"attribute", "default"}},         {"indent", {"width", "first", "blank"}},
      {"int", {"default"}},                      {"float", {"default"}},
      {"replace", {"count"}}};
  const auto it = allowed.find(name);
  for (const std::string& key : keys)
    if (it == allowed.end() || !it->second.count(key))
      template_fail("unsupported argument '" + key + "' of filter '" + name + "'", line);
}

Value apply_filter(const std::string& name, const Value& v, const Array& args, const KwArgs& kwargs, int line) {
  for (const auto& [key, value] : kwargs)
    if (key == "ensure_ascii" && value.truthy())
      template_fail("unsupported argument 'ensure_ascii=true' of filter 'tojson'", line);
  if (name == "safe") return v;
  if (name == "default" || name == "d") {
    const bool boolean = param(args, kwargs, 1, "boolean", Value::boolean(false)).truthy();
    if (v.is_undefined() || (boolean && !v.truthy())) return param(args, kwargs, 0, "default_value", Value::string(""));
    return v;
  }
  if (name == "tojson") {
    const Value ind = param(args, kwargs, 0, "indent", Value::none());
    return Value::string(v.to_json(ind.kind == Kind::kInt ? static_cast<int>(ind.i) : -1));
  }
  if (name == "string") return Value::string(v.is_undefined() ? "" : v.str());
  if (name == "length" || name == "count") {
    if (v.is_string()) return Value::integer(static_cast<int64_t>(code_points(v.s).size()));
    if (v.is_array()) return Value::integer(static_cast<int64_t>(v.arr->size()));
    if (v.has_attributes()) return Value::integer(static_cast<int64_t>(v.obj->items.size()));
    bad_operand(name, v, line);
  }
  if (name == "trim") {
    if (!v.is_string()) bad_operand(name, v, line);
    return Value::string(trim(v.s));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize")
    return call_method(v, name, {}, {}, line);
  if (name == "replace") {
    if (!v.is_string()) bad_operand(name, v, line);
    return call_method(v, "replace", args, kwargs, line);
  }
  if (name == "indent") return indent(v, args, kwargs, line);
  if (name == "wordcount") {
    if (!v.is_string()) bad_operand(name, v, line);
    return Value::integer(static_cast<int64_t>(split_whitespace(v.s, -1).size()));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::array();
    if (!v.is_object()) bad_operand(name, v, line);
    return call_method(v, "items", {}, {}, line);
  }
  if (name == "first" || name == "last") {
    if (v.is_string()) {
      const auto cps = code_points(v.s);
      if (cps.empty()) return Value();
      return Value::string(name == "first" ? cps.front() : cps.back());
    }
    if (!v.is_array()) bad_operand(name, v, line);
    if (v.arr->empty()) return Value();
    return name == "first" ? v.arr->front() : v.arr->back();
  }
  if (name == "list") {
    if (v.is_array()) return Value::array(*v.arr);
    Array out;
    if (v.is_string()) {
      for (auto& c : code_points(v.s)) out.push_back(Value::string(c));
    } else if (v.is_object()) {
      for (const auto& kv : v.obj->items) out.push_back(Value::string(kv.first));
    } else {
      bad_operand(name, v, line);
    }
    return Value::array(std::move(out));
  }
  if (name == "reverse") {
    if (v.is_string()) {
      auto cps = code_points(v.s);
      std::string out;
      for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
      return Value::string(out);
    }
    if (!v.is_array()) bad_operand(name, v, line);
    return Value::array(Array(v.arr->rbegin(), v.arr->rend()));
  }
  if (name == "unique") {
    if (!v.is_array()) bad_operand(name, v, line);
    Array out;
    for (const Value& x : *v.arr)
      if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return equal(x, y); })) out.push_back(x);
    return Value::array(std::move(out));
  }
  if (name == "join") {
    const Value sep = param(args, kwargs, 0, "d", Value::string(""));
    if (!sep.is_string()) template_fail("filter 'join' needs a string separator", line);
    std::string out;
    if (v.is_string()) {
      const auto cps = code_points(v.s);
      for (size_t k = 0; k < cps.size(); ++k) out += (k ? sep.s : "") + cps[k];
      return Value::string(out);
    }
    if (!v.is_array()) bad_operand(name, v, line);
    for (size_t k = 0; k < v.arr->size(); ++k) out += (k ? sep.s : "") + (*v.arr)[k].str();
    return Value::string(out);
  }
  if (name == "map") {
    if (!v.is_array()) bad_operand(name, v, line);
    const Value attr = param({}, kwargs, 0, "attribute", Value());
    if (!attr.is_string()) template_fail("filter 'map' is supported with attribute='name' only", line);
    const Value fallback = param({}, kwargs, 0, "default", Value());
    Array out;
    for (const Value& item : *v.arr) {
      Value x = get_attribute(item, attr.s);
      out.push_back(x.is_undefined() ? fallback : x);
    }
    return Value::array(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr")
    return select_items(name, v, args, line);
  if (name == "int" || name == "float" || name == "abs") {
    if (name == "abs") {
      if (v.kind == Kind::kInt) return Value::integer(v.i < 0 ? -v.i : v.i);
      if (v.kind == Kind::kFloat) return Value::number(std::fabs(v.f));
      bad_operand(name, v, line);
    }
    const bool to_int = name == "int";
    const Value fallback = param(args, kwargs, 0, "default", to_int ? Value::integer(0) : Value::number(0));
    double x = 0;
    if (v.is_numeric() || v.kind == Kind::kBool) {
      x = v.as_double();
    } else if (v.is_string()) {
      try {
        size_t used = 0;
        x = std::stod(trim(v.s), &used);
      } catch (const std::exception&) {
        return fallback;
      }
    } else {
      return fallback;
    }
    return to_int ? Value::integer(static_cast<int64_t>(std::trunc(x))) : Value::number(x);
  }
  template_fail("unsupported filter '" + name + "'", line);
}

}  // namespace mt::chat
