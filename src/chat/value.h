// Values of the chat-template interpreter, as Jinja (through @huggingface/jinja,
// the reference) sees them: undefined, none, booleans, integers, floats,
// strings, lists, mappings (insertion-ordered, as Python dicts and JSON
// objects), namespaces (namespace(...), the one mutable object) and functions
// (raise_exception, strftime_now, macros, bound string methods).
// Lists, mappings and namespaces are shared by reference, as in Python.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace mt::chat {

struct Value;
using Array = std::vector<Value>;
using KwArgs = std::vector<std::pair<std::string, Value>>;

// A mapping that keeps insertion order (small: linear look-up).
struct Object {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);
};

// A callable value; `line` is the template line of the call (for errors).
using Callable = std::function<Value(const Array& args, const KwArgs& kwargs, int line)>;
struct Function {
  std::string name;
  Callable call;
};

enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kNamespace, kFunction };

struct Value {
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<Array> arr;
  std::shared_ptr<Object> obj;  // mapping or namespace
  std::shared_ptr<Function> fn;

  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value number(double v);
  static Value string(std::string v);
  static Value array(Array v = {});
  static Value object(Object v = {});
  static Value namespace_(Object v = {});
  static Value function(std::string name, Callable call);
  static Value from_json(const nlohmann::ordered_json& j);

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_array() const { return kind == Kind::kArray; }
  bool is_object() const { return kind == Kind::kObject; }
  bool is_numeric() const { return kind == Kind::kInt || kind == Kind::kFloat; }
  bool has_attributes() const { return kind == Kind::kObject || kind == Kind::kNamespace; }
  double as_double() const { return kind == Kind::kInt ? static_cast<double>(i) : kind == Kind::kBool ? b : f; }

  bool truthy() const;
  // What {{ value }} prints: strings as they are, true/false, integers,
  // floats with a ".0" when whole, lists and mappings as JSON (undefined and
  // none print nothing: the caller skips them).
  std::string str() const;
  // JSON as the tojson filter writes it: ", " and ": " separators, or
  // `indent` spaces per level (then "," between items); non-ASCII kept.
  std::string to_json(int indent = -1, bool undefined_as_null = true) const;
  const char* type_name() const;
  // "an integer", "a string", "undefined", "none" (for error messages).
  std::string described() const;
};

// Python's ==: deep for lists and mappings; an int equals the same float;
// undefined equals none (as in the reference).
bool equal(const Value& a, const Value& b);
// JSON string literal of `s` (", \\, control characters escaped; UTF-8 kept).
std::string json_quote(const std::string& s);
// A number as JavaScript prints it (the reference's JSON.stringify).
std::string js_number(double v);

}  // namespace mt::chat
