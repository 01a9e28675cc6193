#include "chat/evaluator.h"

#include <cmath>
#include <ctime>
#include <map>

#include "chat/builtins.h"
#include "chat/error.h"
#include "chat/text.h"

namespace mt::chat {
namespace {

struct Scope {
  std::map<std::string, Value> vars;
  const Scope* parent = nullptr;
  const Value* lookup(const std::string& name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};

enum class Flow { kNormal, kBreak, kContinue };

// Bounds on what a template can ask for (it comes from a checkpoint's files).
constexpr int kMaxMacroDepth = 64;
constexpr int64_t kMaxRange = 1 << 20;         // items of range()
constexpr size_t kMaxRepeat = size_t{1} << 26;  // bytes of 'text' * n

// Python's slice indices over n items.
std::vector<size_t> slice_indices(int64_t n, const Value& start, const Value& stop, const Value& step, int line) {
  auto as_int = [&](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (v.kind != Kind::kInt) template_fail(std::string("slice ") + what + " must be an integer", line);
    return v.i;
  };
  const int64_t st = as_int(step, "step").value_or(1);
  if (st == 0) template_fail("slice step cannot be zero", line);
  auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t x = *v < 0 ? *v + n : *v;
    if (st > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t b = clamp(as_int(start, "start"), st > 0 ? 0 : n - 1);
  const int64_t e = clamp(as_int(stop, "stop"), st > 0 ? n : -1);
  std::vector<size_t> out;
  for (int64_t k = b; st > 0 ? k < e : k > e; k += st) out.push_back(static_cast<size_t>(k));
  return out;
}

class Evaluator {
 public:
  Evaluator(const Body& root, const EvalOptions& options) : root_(root), options_(options) {}

  std::string run(const Object& variables) {
    Scope globals;
    add_globals(globals);
    for (const auto& [k, v] : variables.items) globals.vars[k] = v;
    root_scope_ = &globals;
    std::string out;
    exec(root_, globals, out);
    return out;
  }

 private:
  void add_globals(Scope& g) {
    g.vars["raise_exception"] = Value::function("raise_exception", [](const Array& args, const KwArgs&, int line) -> Value {
      const std::string msg = args.empty() ? "" : args[0].str();
      throw TemplateError("chat template: raise_exception at line " + std::to_string(line) + ": " + msg, line, true,
                          msg);
    });
    g.vars["strftime_now"] = Value::function("strftime_now", [this](const Array& args, const KwArgs&, int line) {
      if (args.empty() || !args[0].is_string()) template_fail("strftime_now needs a format string", line);
      const bool frozen = options_.now_epoch_s.has_value();
      return Value::string(format_time(args[0].s, frozen ? *options_.now_epoch_s : std::time(nullptr), frozen));
    });
    g.vars["namespace"] = Value::function("namespace", [](const Array& args, const KwArgs& kwargs, int line) {
      Object o;
      if (args.size() > 1) template_fail("namespace() takes at most one positional argument", line);
      if (!args.empty()) {
        if (!args[0].is_object()) template_fail("namespace() takes a mapping", line);
        o = *args[0].obj;
      }
      for (const auto& [k, v] : kwargs) o.set(k, v);
      return Value::namespace_(std::move(o));
    });
    g.vars["range"] = Value::function("range", [](const Array& args, const KwArgs&, int line) {
      for (const Value& a : args)
        if (a.kind != Kind::kInt) template_fail("range() takes integers", line);
      if (args.empty() || args.size() > 3) template_fail("range() takes 1 to 3 integers", line);
      const int64_t start = args.size() > 1 ? args[0].i : 0, stop = args.size() > 1 ? args[1].i : args[0].i;
      const int64_t step = args.size() > 2 ? args[2].i : 1;
      if (step == 0) template_fail("range() step cannot be zero", line);
      const double count = (static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step);
      if (count > static_cast<double>(kMaxRange))
        template_fail("range() of more than " + std::to_string(kMaxRange) + " items", line);
      Array out;
      for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) out.push_back(Value::integer(k));
      return Value::array(std::move(out));
    });
  }

  Flow exec(const Body& body, Scope& scope, std::string& out) {
    for (const StmtPtr& s : body) {
      const Flow f = exec(*s, scope, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  Flow exec(const Stmt& s, Scope& scope, std::string& out) {
    switch (s.kind) {
      case StmtKind::kText: out += s.text; return Flow::kNormal;
      case StmtKind::kOutput: {
        const Value v = eval(*s.expr, scope);
        if (!v.is_undefined() && !v.is_none()) out += v.str();
        return Flow::kNormal;
      }
      case StmtKind::kIf: return exec(eval(*s.expr, scope).truthy() ? s.body : s.orelse, scope, out);
      case StmtKind::kFor: return exec_for(s, scope, out);
      case StmtKind::kSet: exec_set(s, scope); return Flow::kNormal;
      case StmtKind::kMacro: define_macro(s, scope); return Flow::kNormal;
      case StmtKind::kBreak: return Flow::kBreak;
      case StmtKind::kContinue: return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  void bind(const std::vector<std::string>& names, const Value& v, Scope& scope, int line) {
    if (names.size() == 1) {
      scope.vars[names[0]] = v;
      return;
    }
    if (!v.is_array()) template_fail("cannot unpack " + v.described() + " into " +
                                         std::to_string(names.size()) + " names", line);
    if (v.arr->size() != names.size())
      template_fail("cannot unpack " + std::to_string(v.arr->size()) + " values into " +
                        std::to_string(names.size()) + " names", line);
    for (size_t k = 0; k < names.size(); ++k) scope.vars[names[k]] = (*v.arr)[k];
  }

  Flow exec_for(const Stmt& s, Scope& scope, std::string& out) {
    Scope loop_scope;
    loop_scope.parent = &scope;
    const Value iterable = eval(*s.expr, scope);
    Array items;
    if (iterable.is_array()) {
      items = *iterable.arr;
    } else if (iterable.is_object()) {
      for (const auto& kv : iterable.obj->items) items.push_back(Value::string(kv.first));
    } else if (iterable.is_string()) {
      for (auto& c : code_points(iterable.s)) items.push_back(Value::string(c));
    } else if (!iterable.is_undefined()) {
      template_fail("cannot loop over " + iterable.described(), s.line);
    }
    if (s.cond) {  // {% for x in xs if cond %}: loop.* counts the kept items
      Array kept;
      for (const Value& item : items) {
        Scope probe;
        probe.parent = &scope;
        bind(s.names, item, probe, s.line);
        if (eval(*s.cond, probe).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t k = 0; k < n; ++k) {
      Object loop;
      loop.items = {{"index", Value::integer(k + 1)},
                    {"index0", Value::integer(k)},
                    {"revindex", Value::integer(n - k)},
                    {"revindex0", Value::integer(n - k - 1)},
                    {"first", Value::boolean(k == 0)},
                    {"last", Value::boolean(k == n - 1)},
                    {"length", Value::integer(n)},
                    {"previtem", k > 0 ? items[static_cast<size_t>(k - 1)] : Value()},
                    {"nextitem", k + 1 < n ? items[static_cast<size_t>(k + 1)] : Value()}};
      loop_scope.vars["loop"] = Value::object(std::move(loop));
      bind(s.names, items[static_cast<size_t>(k)], loop_scope, s.line);
      if (exec(s.body, loop_scope, out) == Flow::kBreak) break;
    }
    if (n == 0) exec(s.orelse, loop_scope, out);
    return Flow::kNormal;
  }

  void exec_set(const Stmt& s, Scope& scope) {
    Value v;
    if (s.expr) {
      v = eval(*s.expr, scope);
    } else {
      std::string block;
      exec(s.body, scope, block);
      v = Value::string(block);
    }
    if (s.text.empty()) {
      bind(s.names, v, scope, s.line);
      return;
    }
    const Value* target = scope.lookup(s.names[0]);
    if (target == nullptr || target->kind != Kind::kNamespace)
      template_fail("cannot set '" + s.names[0] + "." + s.text + "': '" + s.names[0] + "' is not a namespace()",
                    s.line);
    target->obj->set(s.text, std::move(v));
  }

  void define_macro(const Stmt& s, Scope& scope) {
    const Stmt* macro = &s;
    scope.vars[s.text] = Value::function(s.text, [this, macro](const Array& args, const KwArgs& kwargs, int line) {
      if (args.size() > macro->params.size())
        template_fail("macro '" + macro->text + "' takes " + std::to_string(macro->params.size()) + " arguments, got " +
                          std::to_string(args.size()), line);
      if (macro_depth_ >= kMaxMacroDepth)
        template_fail("macro '" + macro->text + "' calls nested deeper than " + std::to_string(kMaxMacroDepth), line);
      ++macro_depth_;
      struct Leave {
        int& depth;
        ~Leave() { --depth; }
      } leave{macro_depth_};
      Scope call;
      call.parent = root_scope_;
      for (size_t k = 0; k < macro->params.size(); ++k) {
        const auto& [name, def] = macro->params[k];
        Value v = k < args.size() ? args[k] : def ? eval(*def, call) : Value();
        for (const auto& [key, val] : kwargs)
          if (key == name) v = val;
        call.vars[name] = v;
      }
      for (const auto& [key, val] : kwargs) {
        bool known = false;
        for (const auto& p : macro->params) known = known || p.first == key;
        if (!known) template_fail("macro '" + macro->text + "' has no parameter '" + key + "'", line);
      }
      std::string out;
      exec(macro->body, call, out);
      return Value::string(out);
    });
  }

  // ---- expressions ----
  Value eval(const Expr& e, const Scope& scope) {
    switch (e.kind) {
      case ExprKind::kLiteral: return e.value;
      case ExprKind::kName: {
        const Value* v = scope.lookup(e.name);
        return v ? *v : Value();
      }
      case ExprKind::kList:
      case ExprKind::kTuple: {
        Array a;
        for (const ExprPtr& x : e.items) a.push_back(eval(*x, scope));
        return Value::array(std::move(a));
      }
      case ExprKind::kDict: {
        Object o;
        for (size_t k = 0; k + 1 < e.items.size(); k += 2) {
          const Value key = eval(*e.items[k], scope);
          if (!key.is_string()) template_fail("a mapping key must be a string, not " + key.described(),
                                              e.line);
          o.set(key.s, eval(*e.items[k + 1], scope));
        }
        return Value::object(std::move(o));
      }
      case ExprKind::kAttr: return get_attribute(eval(*e.object, scope), e.name);
      case ExprKind::kIndex: return index(eval(*e.object, scope), eval(*e.items[0], scope), e.line);
      case ExprKind::kSlice: return slice(e, scope);
      case ExprKind::kCall: return call(e, scope);
      case ExprKind::kFilter: {
        const Value v = eval(*e.object, scope);
        Array args;
        KwArgs kwargs;
        eval_args(e, scope, args, kwargs);
        return apply_filter(e.name, v, args, kwargs, e.line);
      }
      case ExprKind::kTest: {
        const Value v = eval(*e.object, scope);
        Array args;
        KwArgs kwargs;
        eval_args(e, scope, args, kwargs);
        return Value::boolean(apply_test(e.name, v, args, e.line) != e.negated);
      }
      case ExprKind::kUnary: return unary(e, scope);
      case ExprKind::kBinary: return binary(e, scope);
      case ExprKind::kTernary:
        if (eval(*e.items[0], scope).truthy()) return eval(*e.object, scope);
        return e.items[1] ? eval(*e.items[1], scope) : Value();
    }
    return Value();
  }

  void eval_args(const Expr& e, const Scope& scope, Array& args, KwArgs& kwargs) {
    for (const ExprPtr& a : e.items) args.push_back(eval(*a, scope));
    for (const auto& [k, a] : e.kwargs) kwargs.emplace_back(k, eval(*a, scope));
  }

  static Value index(const Value& obj, const Value& key, int line) {
    if (obj.has_attributes()) {
      if (!key.is_string()) return Value();
      return get_attribute(obj, key.s);
    }
    if (key.kind == Kind::kInt && (obj.is_array() || obj.is_string())) {
      if (obj.is_array()) {
        const auto n = static_cast<int64_t>(obj.arr->size());
        const int64_t k = key.i < 0 ? key.i + n : key.i;
        return k >= 0 && k < n ? (*obj.arr)[static_cast<size_t>(k)] : Value();
      }
      const auto cps = code_points(obj.s);
      const auto n = static_cast<int64_t>(cps.size());
      const int64_t k = key.i < 0 ? key.i + n : key.i;
      return k >= 0 && k < n ? Value::string(cps[static_cast<size_t>(k)]) : Value();
    }
    if (key.is_string()) return get_attribute(obj, key.s);
    if (obj.is_undefined() || obj.is_none()) return Value();
    template_fail("cannot index " + obj.described() + " with " + key.described(), line);
  }

  Value slice(const Expr& e, const Scope& scope) {
    const Value obj = eval(*e.object, scope);
    Value parts[3];
    for (size_t k = 0; k < 3; ++k)
      if (e.items[k]) parts[k] = eval(*e.items[k], scope);
    if (obj.is_array()) {
      Array out;
      for (size_t k : slice_indices(static_cast<int64_t>(obj.arr->size()), parts[0], parts[1], parts[2], e.line))
        out.push_back((*obj.arr)[k]);
      return Value::array(std::move(out));
    }
    if (obj.is_string()) {
      const auto cps = code_points(obj.s);
      std::string out;
      for (size_t k : slice_indices(static_cast<int64_t>(cps.size()), parts[0], parts[1], parts[2], e.line))
        out += cps[k];
      return Value::string(out);
    }
    template_fail("cannot slice " + obj.described(), e.line);
  }

  Value call(const Expr& e, const Scope& scope) {
    Array args;
    KwArgs kwargs;
    if (e.object->kind == ExprKind::kAttr) {  // a method, or a function kept in a mapping
      const Value obj = eval(*e.object->object, scope);
      eval_args(e, scope, args, kwargs);
      const Value member = get_attribute(obj, e.object->name);
      if (member.kind == Kind::kFunction) return member.fn->call(args, kwargs, e.line);
      if (obj.is_undefined() || obj.is_none())
        template_fail("cannot call method '" + e.object->name + "' of " + obj.described(), e.line);
      return call_method(obj, e.object->name, args, kwargs, e.line);
    }
    const Value fn = eval(*e.object, scope);
    eval_args(e, scope, args, kwargs);
    if (fn.kind != Kind::kFunction) {
      const std::string what = e.object->kind == ExprKind::kName ? "'" + e.object->name + "'" : "a value";
      template_fail("cannot call " + what + ": it is " + fn.described(), e.line);
    }
    return fn.fn->call(args, kwargs, e.line);
  }

  Value unary(const Expr& e, const Scope& scope) {
    const Value v = eval(*e.object, scope);
    if (e.name == "not") return Value::boolean(!v.truthy());
    const int sign = e.name == "-" ? -1 : 1;
    if (v.kind == Kind::kInt || v.kind == Kind::kBool) return Value::integer(sign * (v.kind == Kind::kInt ? v.i : v.b));
    if (v.kind == Kind::kFloat) return Value::number(sign * v.f);
    template_fail("unary '" + e.name + "' of " + v.described(), e.line);
  }

  Value binary(const Expr& e, const Scope& scope) {
    const std::string& op = e.name;
    const Value a = eval(*e.object, scope);
    if (op == "and") return a.truthy() ? eval(*e.items[0], scope) : a;
    if (op == "or") return a.truthy() ? a : eval(*e.items[0], scope);
    const Value b = eval(*e.items[0], scope);
    if (op == "==") return Value::boolean(equal(a, b));
    if (op == "!=") return Value::boolean(!equal(a, b));
    if (op == "in" || op == "not in") {
      if (b.is_undefined()) return Value::boolean(op == "not in");
      return Value::boolean(apply_test("in", a, {b}, e.line) == (op == "in"));
    }
    auto fail = [&]() -> Value {
      template_fail("cannot apply '" + op + "' to " + a.described() + " and " + b.described(), e.line);
    };
    if (a.is_undefined() || b.is_undefined() || a.is_none() || b.is_none()) return fail();
    if (op == "~") return Value::string(a.str() + b.str());
    const bool nums = (a.is_numeric() || a.kind == Kind::kBool) && (b.is_numeric() || b.kind == Kind::kBool);
    if (nums) return arithmetic(op, a, b, e.line);
    if (op == "+") {
      if (a.is_array() && b.is_array()) {
        Array out = *a.arr;
        out.insert(out.end(), b.arr->begin(), b.arr->end());
        return Value::array(std::move(out));
      }
      // A string and a number concatenate (as the reference); a string and a
      // list or mapping is Python's TypeError (the reference would paste
      // JavaScript's Array.toString() into the prompt).
      const bool containers = a.is_array() || b.is_array() || a.has_attributes() || b.has_attributes();
      if ((a.is_string() || b.is_string()) && !containers) return Value::string(a.str() + b.str());
    }
    if (op == "*" && (a.is_string() || b.is_string()) && (a.kind == Kind::kInt || b.kind == Kind::kInt)) {
      const Value& text = a.is_string() ? a : b;
      const int64_t times = a.is_string() ? b.i : a.i;
      if (times > 0 && text.s.size() * static_cast<size_t>(times) > kMaxRepeat)
        template_fail("string repetition of more than " + std::to_string(kMaxRepeat) + " bytes", e.line);
      std::string out;
      for (int64_t k = 0; k < times; ++k) out += text.s;
      return Value::string(out);
    }
    if (a.is_string() && b.is_string()) {
      if (op == "<") return Value::boolean(a.s < b.s);
      if (op == ">") return Value::boolean(a.s > b.s);
      if (op == "<=") return Value::boolean(a.s <= b.s);
      if (op == ">=") return Value::boolean(a.s >= b.s);
    }
    return fail();
  }

  static Value arithmetic(const std::string& op, const Value& a, const Value& b, int line) {
    const bool floats = a.kind == Kind::kFloat || b.kind == Kind::kFloat;
    const double x = a.as_double(), y = b.as_double();
    if (op == "<") return Value::boolean(x < y);
    if (op == ">") return Value::boolean(x > y);
    if (op == "<=") return Value::boolean(x <= y);
    if (op == ">=") return Value::boolean(x >= y);
    if (op == "/") {
      if (y == 0) template_fail("division by zero", line);
      return Value::number(x / y);
    }
    if (op == "**") {
      const double r = std::pow(x, y);
      return floats || y < 0 ? Value::number(r) : Value::integer(static_cast<int64_t>(std::llround(r)));
    }
    if (floats) {
      if (op == "+") return Value::number(x + y);
      if (op == "-") return Value::number(x - y);
      if (op == "*") return Value::number(x * y);
      if (y == 0) template_fail("division by zero", line);
      if (op == "//") return Value::number(std::floor(x / y));
      if (op == "%") return Value::number(x - y * std::floor(x / y));
    }
    const int64_t i = a.kind == Kind::kBool ? a.b : a.i, j = b.kind == Kind::kBool ? b.b : b.i;
    if (op == "+") return Value::integer(i + j);
    if (op == "-") return Value::integer(i - j);
    if (op == "*") return Value::integer(i * j);
    if (j == 0) template_fail("division by zero", line);
    const int64_t q = i / j - ((i % j != 0) && ((i < 0) != (j < 0)));  // floor division, as Python
    if (op == "//") return Value::integer(q);
    if (op == "%") return Value::integer(i - q * j);
    template_fail("unsupported operator '" + op + "'", line);
  }

  const Body& root_;
  const EvalOptions& options_;
  const Scope* root_scope_ = nullptr;
  int macro_depth_ = 0;
};

}  // namespace

std::string format_time(const std::string& format, int64_t epoch_s, bool utc) {
  static const char* kMonths[] = {"January", "February", "March",     "April",   "May",      "June",
                                  "July",    "August",   "September", "October", "November", "December"};
  static const char* kDays[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
  const auto t = static_cast<std::time_t>(epoch_s);
  std::tm tm{};
  if (utc) gmtime_r(&t, &tm);
  else localtime_r(&t, &tm);
  auto pad = [](int v, int width = 2) {
    std::string s = std::to_string(v);
    return std::string(s.size() < static_cast<size_t>(width) ? width - s.size() : 0, '0') + s;
  };
  std::string out;
  for (size_t k = 0; k < format.size(); ++k) {
    if (format[k] != '%' || k + 1 >= format.size()) {
      out += format[k];
      continue;
    }
    const char c = format[++k];
    switch (c) {
      case 'Y': out += std::to_string(tm.tm_year + 1900); break;
      case 'y': out += pad(tm.tm_year % 100); break;
      case 'm': out += pad(tm.tm_mon + 1); break;
      case 'd': out += pad(tm.tm_mday); break;
      case 'e': out += (tm.tm_mday < 10 ? " " : "") + std::to_string(tm.tm_mday); break;
      case 'H': out += pad(tm.tm_hour); break;
      case 'I': out += pad(tm.tm_hour % 12 == 0 ? 12 : tm.tm_hour % 12); break;
      case 'M': out += pad(tm.tm_min); break;
      case 'S': out += pad(tm.tm_sec); break;
      case 'p': out += tm.tm_hour < 12 ? "AM" : "PM"; break;
      case 'j': out += pad(tm.tm_yday + 1, 3); break;
      case 'b': out += std::string(kMonths[tm.tm_mon]).substr(0, 3); break;
      case 'B': out += kMonths[tm.tm_mon]; break;
      case 'a': out += std::string(kDays[tm.tm_wday]).substr(0, 3); break;
      case 'A': out += kDays[tm.tm_wday]; break;
      case '%': out += '%'; break;
      default: out += '%', out += c;
    }
  }
  return out;
}

std::string evaluate(const Body& body, const Object& variables, const EvalOptions& options) {
  return Evaluator(body, options).run(variables);
}

}  // namespace mt::chat
