// Tests (`is ...`), attribute look-up and the known-name lists; the filters
// are in filters.cc, the methods in methods.cc.
#include "chat/builtins.h"

#include <set>

#include "chat/error.h"

namespace mt::chat {

bool is_known_filter(const std::string& name) {
  static const std::set<std::string> k = {
      "abs",   "capitalize", "count", "d",       "default", "first", "float",     "indent", "int",
      "items", "join",       "last",  "length",  "list",    "lower", "map",       "reject", "rejectattr",
      "replace", "reverse",  "safe",  "select",  "selectattr", "string", "title", "tojson", "trim",
      "unique", "upper",     "wordcount"};
  return k.count(name) > 0;
}

bool is_known_test(const std::string& name) {
  static const std::set<std::string> k = {
      "boolean", "callable", "defined", "divisibleby", "eq",    "equalto", "even",  "false",    "float",
      "ge",      "gt",       "in",      "integer",     "iterable", "le",   "lower", "lt",       "mapping",
      "ne",      "none",     "number",  "odd",         "sameas", "sequence", "string", "true", "undefined",
      "upper"};
  return k.count(name) > 0;
}

bool is_known_method(const std::string& name) {
  static const std::set<std::string> k = {
      // str
      "capitalize", "count", "endswith", "find", "join", "lower", "lstrip", "replace", "rstrip", "split",
      "startswith", "strip", "title", "upper",
      // dict
      "get", "items", "keys", "values"};
  return k.count(name) > 0;
}

bool is_known_global(const std::string& name) {
  static const std::set<std::string> k = {"namespace", "raise_exception", "range", "strftime_now"};
  return k.count(name) > 0;
}

namespace {

const Value& arg(const Array& args, size_t k, const std::string& test, int line) {
  if (k >= args.size()) template_fail("test '" + test + "' needs an argument", line);
  return args[k];
}

bool compare_less(const Value& a, const Value& b, const std::string& what, int line) {
  if ((a.is_numeric() || a.kind == Kind::kBool) && (b.is_numeric() || b.kind == Kind::kBool))
    return a.as_double() < b.as_double();
  if (a.is_string() && b.is_string()) return a.s < b.s;
  template_fail("cannot compare " + a.described() + " with " + b.described() + " in '" + what + "'",
                line);
}

}  // namespace

bool apply_test(const std::string& name, const Value& v, const Array& args, int line) {
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind == Kind::kBool;
  if (name == "true") return v.kind == Kind::kBool && v.b;
  if (name == "false") return v.kind == Kind::kBool && !v.b;
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_numeric();
  if (name == "integer") return v.kind == Kind::kInt;
  if (name == "float") return v.kind == Kind::kFloat;
  if (name == "mapping") return v.is_object();
  if (name == "iterable") return v.is_array() || v.is_string() || v.is_object();
  if (name == "sequence") return v.is_array() || v.is_string() || v.is_object();
  if (name == "callable") return v.kind == Kind::kFunction;
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    for (char c : v.s)
      if (name == "lower" ? (c >= 'A' && c <= 'Z') : (c >= 'a' && c <= 'z')) return false;
    return true;
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (v.kind != Kind::kInt) template_fail("test '" + name + "' of " + v.described() + " (not an integer)", line);
    if (name == "divisibleby") {
      const Value& d = arg(args, 0, name, line);
      if (d.kind != Kind::kInt || d.i == 0) template_fail("test 'divisibleby' needs a non-zero integer", line);
      return v.i % d.i == 0;
    }
    return (v.i % 2 != 0) == (name == "odd");
  }
  if (name == "eq" || name == "equalto" || name == "sameas") return equal(v, arg(args, 0, name, line));
  if (name == "ne") return !equal(v, arg(args, 0, name, line));
  if (name == "lt") return compare_less(v, arg(args, 0, name, line), name, line);
  if (name == "gt") return compare_less(arg(args, 0, name, line), v, name, line);
  if (name == "le") return !compare_less(arg(args, 0, name, line), v, name, line);
  if (name == "ge") return !compare_less(v, arg(args, 0, name, line), name, line);
  if (name == "in") {
    const Value& c = arg(args, 0, name, line);
    if (c.is_string() && v.is_string()) return c.s.find(v.s) != std::string::npos;
    if (c.is_array()) {
      for (const Value& x : *c.arr)
        if (equal(x, v)) return true;
      return false;
    }
    if (c.is_object() && v.is_string()) return c.obj->find(v.s) != nullptr;
    template_fail("test 'in' of " + c.described(), line);
  }
  template_fail("unsupported test '" + name + "'", line);
}

Value get_attribute(const Value& object, const std::string& name) {
  if (object.has_attributes()) {
    if (const Value* v = object.obj->find(name)) return *v;
    return Value();
  }
  if (name == "length" && object.is_string()) return Value::integer(static_cast<int64_t>(object.s.size()));
  if (name == "length" && object.is_array()) return Value::integer(static_cast<int64_t>(object.arr->size()));
  return Value();
}

}  // namespace mt::chat
