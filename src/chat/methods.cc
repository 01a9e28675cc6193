// The built-in methods: Python's str methods and dict's get/items/keys/values.
#include <algorithm>

#include "chat/builtins.h"
#include "chat/error.h"
#include "chat/text.h"

namespace mt::chat {
namespace {

std::string need_string(const Array& args, size_t k, const std::string& method, int line) {
  if (k >= args.size() || !args[k].is_string())
    template_fail("method '" + method + "' needs a string argument " + std::to_string(k + 1), line);
  return args[k].s;
}

int64_t optional_int(const Array& args, const KwArgs& kwargs, size_t k, const char* key, int64_t fallback,
                     const std::string& method, int line) {
  const Value* v = k < args.size() ? &args[k] : nullptr;
  for (const auto& [name, val] : kwargs)
    if (name == key) v = &val;
  if (v == nullptr || v->is_none()) return fallback;
  if (v->kind != Kind::kInt) template_fail("method '" + method + "' needs an integer " + key, line);
  return v->i;
}

// startswith/endswith with a string or a tuple of strings.
bool affix(const std::string& s, const Value& pattern, bool prefix, const std::string& method, int line) {
  auto one = [&](const std::string& p) {
    return p.size() <= s.size() && (prefix ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0);
  };
  if (pattern.is_string()) return one(pattern.s);
  if (pattern.is_array()) {
    for (const Value& p : *pattern.arr) {
      if (!p.is_string()) template_fail("method '" + method + "' needs strings", line);
      if (one(p.s)) return true;
    }
    return false;
  }
  template_fail("method '" + method + "' needs a string or a tuple of strings", line);
}

Value string_method(const std::string& s, const std::string& name, const Array& args, const KwArgs& kwargs, int line) {
  if (name == "startswith" || name == "endswith") {
    if (args.empty()) template_fail("method '" + name + "' needs an argument", line);
    return Value::boolean(affix(s, args[0], name == "startswith", name, line));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Value chars = args.empty() ? Value::none() : args[0];
    if (!chars.is_none() && !chars.is_string()) template_fail("method '" + name + "' needs a string or none", line);
    return Value::string(strip_chars(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split") {
    const Value sep = args.empty() ? Value::none() : args[0];
    const int64_t maxsplit = optional_int(args, kwargs, 1, "maxsplit", -1, name, line);
    Array out;
    if (sep.is_none()) {
      for (auto& part : split_whitespace(s, maxsplit)) out.push_back(Value::string(part));
      return Value::array(std::move(out));
    }
    if (!sep.is_string() || sep.s.empty()) template_fail("method 'split' needs a non-empty separator", line);
    size_t start = 0;
    for (;;) {
      const size_t at = s.find(sep.s, start);
      if (at == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit)) break;
      out.push_back(Value::string(s.substr(start, at - start)));
      start = at + sep.s.size();
    }
    out.push_back(Value::string(s.substr(start)));
    return Value::array(std::move(out));
  }
  if (name == "replace") {
    const std::string from = need_string(args, 0, name, line), to = need_string(args, 1, name, line);
    int64_t count = optional_int(args, kwargs, 2, "count", -1, name, line);
    std::string out;
    if (from.empty()) {  // Python: `to` between every code point and at both ends
      const auto cps = code_points(s);
      for (size_t k = 0; k <= cps.size(); ++k) {
        if (count != 0) out += to, --count;
        if (k < cps.size()) out += cps[k];
      }
      return Value::string(out);
    }
    size_t start = 0;
    for (;;) {
      const size_t at = count == 0 ? std::string::npos : s.find(from, start);
      if (at == std::string::npos) break;
      out += s.substr(start, at - start) + to;
      start = at + from.size();
      if (count > 0) --count;
    }
    return Value::string(out + s.substr(start));
  }
  if (name == "upper") return Value::string(ascii_upper(s));
  if (name == "lower") return Value::string(ascii_lower(s));
  if (name == "capitalize" || name == "title") {  // ASCII letters: first (of each word) upper, others lower
    std::string out = ascii_lower(s);
    bool word_start = true;
    for (size_t k = 0; k < out.size(); ++k) {
      const char c = out[k];
      const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
      if (word_start && c >= 'a' && c <= 'z' && (name == "title" || k == 0)) out[k] = static_cast<char>(c - 'a' + 'A');
      word_start = !alnum && static_cast<unsigned char>(c) < 0x80;
    }
    return Value::string(out);
  }
  if (name == "find" || name == "count") {
    const std::string sub = need_string(args, 0, name, line);
    if (name == "find") {
      const size_t at = s.find(sub);
      return Value::integer(at == std::string::npos ? -1 : static_cast<int64_t>(code_points(s.substr(0, at)).size()));
    }
    if (sub.empty()) return Value::integer(static_cast<int64_t>(code_points(s).size()) + 1);
    int64_t n = 0;
    for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
    return Value::integer(n);
  }
  if (name == "join") {
    if (args.empty() || !args[0].is_array()) template_fail("method 'join' needs a list", line);
    std::string out;
    for (size_t k = 0; k < args[0].arr->size(); ++k) {
      const Value& x = (*args[0].arr)[k];
      if (!x.is_string()) template_fail("method 'join' needs a list of strings", line);
      out += (k ? s : "") + x.s;
    }
    return Value::string(out);
  }
  template_fail("unsupported string method '" + name + "'", line);
}

Value mapping_method(const Object& o, const std::string& name, const Array& args, int line) {
  if (name == "get") {
    if (args.empty() || !args[0].is_string()) template_fail("method 'get' needs a string key", line);
    if (const Value* v = o.find(args[0].s)) return *v;
    return args.size() > 1 ? args[1] : Value::none();
  }
  Array out;
  for (const auto& [k, v] : o.items) {
    if (name == "items") out.push_back(Value::array({Value::string(k), v}));
    else if (name == "keys") out.push_back(Value::string(k));
    else if (name == "values") out.push_back(v);
    else template_fail("unsupported mapping method '" + name + "'", line);
  }
  return Value::array(std::move(out));
}

}  // namespace

std::string strip_chars(const std::string& s, const Value& chars, bool left, bool right) {
  if (!chars.is_string()) return trim(s, left, right);
  const auto set = code_points(chars.s);
  const auto cps = code_points(s);
  auto in_set = [&](const std::string& c) { return std::find(set.begin(), set.end(), c) != set.end(); };
  size_t b = 0, e = cps.size();
  while (left && b < e && in_set(cps[b])) ++b;
  while (right && e > b && in_set(cps[e - 1])) --e;
  std::string out;
  for (size_t k = b; k < e; ++k) out += cps[k];
  return out;
}

Value call_method(const Value& object, const std::string& name, const Array& args, const KwArgs& kwargs, int line) {
  if (object.is_string()) return string_method(object.s, name, args, kwargs, line);
  if (object.is_object()) return mapping_method(*object.obj, name, args, line);
  template_fail(object.described() + " has no method '" + name + "'", line);
}

}  // namespace mt::chat
