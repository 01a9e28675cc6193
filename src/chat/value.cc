#include "chat/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat/error.h"

namespace mt::chat {

// Values nested deeper are refused (messages come from clients; a namespace
// can be made to hold itself), rather than overflowing the stack.
constexpr int kMaxNesting = 512;

const Value* Object::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Object::set(const std::string& key, Value v) {
  for (auto& [k, old] : items)
    if (k == key) {
      old = std::move(v);
      return;
    }
  items.emplace_back(key, std::move(v));
}

Value Value::none() { Value v; v.kind = Kind::kNone; return v; }
Value Value::boolean(bool x) { Value v; v.kind = Kind::kBool; v.b = x; return v; }
Value Value::integer(int64_t x) { Value v; v.kind = Kind::kInt; v.i = x; return v; }
Value Value::number(double x) { Value v; v.kind = Kind::kFloat; v.f = x; return v; }
Value Value::string(std::string x) { Value v; v.kind = Kind::kString; v.s = std::move(x); return v; }
Value Value::array(Array x) {
  Value v;
  v.kind = Kind::kArray;
  v.arr = std::make_shared<Array>(std::move(x));
  return v;
}
Value Value::object(Object x) {
  Value v;
  v.kind = Kind::kObject;
  v.obj = std::make_shared<Object>(std::move(x));
  return v;
}
Value Value::namespace_(Object x) {
  Value v = object(std::move(x));
  v.kind = Kind::kNamespace;
  return v;
}
Value Value::function(std::string name, Callable call) {
  Value v;
  v.kind = Kind::kFunction;
  v.fn = std::make_shared<Function>(Function{std::move(name), std::move(call)});
  return v;
}

namespace {

Value from_json_at(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxNesting) template_fail("a JSON value nested deeper than " + std::to_string(kMaxNesting), 0);
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      for (const auto& e : j) a.push_back(from_json_at(e, depth + 1));
      return Value::array(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Object o;
      for (auto it = j.begin(); it != j.end(); ++it)
        o.items.emplace_back(it.key(), from_json_at(it.value(), depth + 1));
      return Value::object(std::move(o));
    }
    default: template_fail(std::string("cannot take a JSON ") + j.type_name() + " as a template value", 0);
  }
}

}  // namespace

Value Value::from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

bool Value::truthy() const {
  switch (kind) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b;
    case Kind::kInt: return i != 0;
    case Kind::kFloat: return f != 0;
    case Kind::kString: return !s.empty();
    case Kind::kArray: return !arr->empty();
    case Kind::kObject: return !obj->items.empty();
    case Kind::kNamespace:
    case Kind::kFunction: return true;
  }
  return false;
}

std::string js_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == std::floor(v) && std::fabs(v) < 1e21) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);  // shortest round trip, as JavaScript
  return std::string(buf, res.ptr);
}

std::string Value::str() const {
  switch (kind) {
    case Kind::kUndefined:
    case Kind::kNone: return "";
    case Kind::kBool: return b ? "true" : "false";
    case Kind::kInt: return std::to_string(i);
    case Kind::kFloat:
      if (f == 0 && std::signbit(f)) return "-0.0";
      if (std::isfinite(f) && f == std::floor(f)) return js_number(f) + ".0";
      return js_number(f);
    case Kind::kString: return s;
    case Kind::kArray:
    case Kind::kObject:
    case Kind::kNamespace: return to_json(-1, false);
    case Kind::kFunction: return "<function " + fn->name + ">";
  }
  return "";
}

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

namespace {

void write_json(const Value& v, int indent, bool undefined_as_null, int depth, std::string& out) {
  if (depth > kMaxNesting)
    template_fail("a value nested deeper than " + std::to_string(kMaxNesting) + " (one that holds itself?)", 0);
  const std::string item_sep = indent >= 0 ? "," : ", ";
  std::string pad;  // (built piece by piece: "literal" + std::string trips GCC 12's false -Wrestrict)
  if (indent > 0) pad.append(1, '\n').append(static_cast<size_t>(indent * depth), ' ');
  const std::string child_pad = indent > 0 ? pad + std::string(static_cast<size_t>(indent), ' ') : "";
  switch (v.kind) {
    case Kind::kUndefined: out += undefined_as_null ? "null" : "undefined"; return;
    case Kind::kNone: out += "null"; return;
    case Kind::kBool: out += v.b ? "true" : "false"; return;
    case Kind::kInt: out += std::to_string(v.i); return;
    case Kind::kFloat: out += js_number(v.f); return;
    case Kind::kString: out += json_quote(v.s); return;
    case Kind::kArray: {
      out += "[";
      for (size_t k = 0; k < v.arr->size(); ++k) {
        if (k > 0) out += item_sep;
        out += child_pad;
        write_json((*v.arr)[k], indent, undefined_as_null, depth + 1, out);
      }
      if (!v.arr->empty()) out += pad;
      out += "]";
      return;
    }
    case Kind::kObject:
    case Kind::kNamespace: {
      out += "{";
      bool first = true;
      for (const auto& [key, val] : v.obj->items) {
        if (!first) out += item_sep;
        first = false;
        out += child_pad + json_quote(key) + ": ";
        write_json(val, indent, undefined_as_null, depth + 1, out);
      }
      if (!v.obj->items.empty()) out += pad;
      out += "}";
      return;
    }
    case Kind::kFunction: template_fail("cannot write a function as JSON", 0);
  }
}

}  // namespace

std::string Value::to_json(int indent, bool undefined_as_null) const {
  std::string out;
  write_json(*this, indent, undefined_as_null, 0, out);
  return out;
}

const char* Value::type_name() const {
  switch (kind) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "none";
    case Kind::kBool: return "boolean";
    case Kind::kInt: return "integer";
    case Kind::kFloat: return "float";
    case Kind::kString: return "string";
    case Kind::kArray: return "list";
    case Kind::kObject: return "mapping";
    case Kind::kNamespace: return "namespace";
    case Kind::kFunction: return "function";
  }
  return "?";
}

std::string Value::described() const {
  if (kind == Kind::kUndefined || kind == Kind::kNone) return type_name();
  const std::string t = type_name();
  return (t[0] == 'i' ? "an " : "a ") + t;
}

namespace {

bool equal_at(const Value& a, const Value& b, int depth) {
  if (depth > kMaxNesting)
    template_fail("a value nested deeper than " + std::to_string(kMaxNesting) + " (one that holds itself?)", 0);
  const bool a_nil = a.is_undefined() || a.is_none(), b_nil = b.is_undefined() || b.is_none();
  if (a_nil || b_nil) return a_nil && b_nil;
  if ((a.is_numeric() || a.kind == Kind::kBool) && (b.is_numeric() || b.kind == Kind::kBool)) {
    return a.as_double() == b.as_double();  // true == 1, as Python
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::kString: return a.s == b.s;
    case Kind::kArray:
      if (a.arr->size() != b.arr->size()) return false;
      for (size_t k = 0; k < a.arr->size(); ++k)
        if (!equal_at((*a.arr)[k], (*b.arr)[k], depth + 1)) return false;
      return true;
    case Kind::kObject:
    case Kind::kNamespace:
      if (a.obj == b.obj) return true;
      if (a.obj->items.size() != b.obj->items.size()) return false;
      for (const auto& [k, v] : a.obj->items) {
        const Value* o = b.obj->find(k);
        if (o == nullptr || !equal_at(v, *o, depth + 1)) return false;
      }
      return true;
    case Kind::kFunction: return a.fn == b.fn;
    default: return false;
  }
}

}  // namespace

bool equal(const Value& a, const Value& b) { return equal_at(a, b, 0); }

}  // namespace mt::chat
