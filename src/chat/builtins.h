// The filters, tests, methods and global functions the interpreter knows,
// with the semantics of Jinja as transformers renders chat templates (the
// reference being @huggingface/jinja). The parser refuses any other name.
#pragma once
#include <string>
#include <vector>

#include "chat/value.h"

namespace mt::chat {

bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);
bool is_known_method(const std::string& name);  // string, mapping and list methods
bool is_known_global(const std::string& name);  // raise_exception, strftime_now, namespace, range

// Refuses (at load) a keyword argument the filter does not take, rather
// than ignoring it and rendering something other than asked.
void check_filter_kwargs(const std::string& name, const std::vector<std::string>& keys, int line);
// value | name(args, kwargs). Throws TemplateError at `line` on a bad operand.
Value apply_filter(const std::string& name, const Value& operand, const Array& args, const KwArgs& kwargs, int line);
// value is name(args).
bool apply_test(const std::string& name, const Value& operand, const Array& args, int line);
// object.name(args, kwargs) for the built-in methods.
Value call_method(const Value& object, const std::string& name, const Array& args, const KwArgs& kwargs, int line);
// object.name / object[name] without a call: a mapping's key, else a
// built-in property (a string's or list's length), else undefined.
Value get_attribute(const Value& object, const std::string& name);

// Python's str.strip family: `chars` (none: whitespace) from the left, right or both.
std::string strip_chars(const std::string& s, const Value& chars, bool left, bool right);

}  // namespace mt::chat
