#include "chat/parser.h"

#include <set>

#include "chat/builtins.h"
#include "chat/error.h"
#include "chat/lexer.h"

namespace mt::chat {
namespace {

ExprPtr make(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

// Nesting deeper than this is refused (a template comes from a checkpoint's
// files: a crafted one must not overflow the stack).
constexpr int kMaxDepth = 200;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Body run() {
    Body body = block({});
    if (peek().type != Tok::kEnd) fail_here("unexpected '{% " + stmt_name() + " %}'");
    // Calls of names: a global function or a macro of this template.
    for (const auto& [name, line] : called_names_)
      if (!is_known_global(name) && !macros_.count(name)) template_fail("unsupported function '" + name + "'", line);
    return body;
  }

 private:
  const Token& peek(size_t k = 0) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  Token next() { return toks_[pos_ < toks_.size() - 1 ? pos_++ : pos_]; }
  bool is_op(const char* op, size_t k = 0) const { return peek(k).type == Tok::kOp && peek(k).value == op; }
  bool is_name(const char* n, size_t k = 0) const { return peek(k).type == Tok::kName && peek(k).value == n; }
  [[noreturn]] void fail_here(const std::string& what) const { template_fail(what, peek().line); }
  std::string describe(const Token& t) const {
    switch (t.type) {
      case Tok::kEnd: return "end of template";
      case Tok::kCloseStmt: return "'%}'";
      case Tok::kCloseExpr: return "'}}'";
      case Tok::kString: return "string '" + t.value + "'";
      default: return "'" + t.value + "'";
    }
  }
  void expect_op(const char* op) {
    if (!is_op(op)) fail_here(std::string("expected '") + op + "', found " + describe(peek()));
    next();
  }
  std::string expect_name(const char* what) {
    if (peek().type != Tok::kName) fail_here(std::string("expected ") + what + ", found " + describe(peek()));
    return next().value;
  }
  void expect_close() {
    if (peek().type != Tok::kCloseStmt) fail_here("expected '%}', found " + describe(peek()));
    next();
  }
  // The statement name after the {% at the current position.
  std::string stmt_name() const { return peek(1).type == Tok::kName ? peek(1).value : describe(peek(1)); }

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxDepth)
        template_fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels", p.peek().line);
    }
    ~DepthGuard() { --p.depth_; }
  };

  // Statements up to (not including) a {% name %} with name in `ends`.
  Body block(const std::set<std::string>& ends) {
    DepthGuard guard(*this);
    Body body;
    for (;;) {
      const Token& t = peek();
      if (t.type == Tok::kEnd) return body;
      if (t.type == Tok::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kText;
        s->line = t.line;
        s->text = next().value;
        body.push_back(std::move(s));
      } else if (t.type == Tok::kOpenExpr) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kOutput;
        s->line = next().line;
        s->expr = expression();
        if (peek().type != Tok::kCloseExpr) fail_here("expected '}}', found " + describe(peek()));
        next();
        body.push_back(std::move(s));
      } else if (t.type == Tok::kOpenStmt) {
        if (ends.count(stmt_name())) return body;
        body.push_back(statement());
      } else {
        fail_here("unexpected " + describe(t));
      }
    }
  }

  // {% end... %} closing a block opened at `open_line`.
  void end_tag(const std::string& end, const std::string& opener, int open_line) {
    if (peek().type != Tok::kOpenStmt || !is_name(end.c_str(), 1))
      template_fail("'{% " + opener + " %}' opened at line " + std::to_string(open_line) + " has no '{% " + end +
                        " %}'",
                    peek().line);
    next();
    next();
    expect_close();
  }

  StmtPtr statement() {
    const int line = next().line;  // {%
    const std::string name = peek().type == Tok::kName ? peek().value : "";
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (name == "if") {
      next();
      return if_rest(line);
    } else if (name == "for") {
      next();
      s->kind = StmtKind::kFor;
      s->names.push_back(expect_name("a loop variable"));
      while (is_op(",")) {
        next();
        s->names.push_back(expect_name("a loop variable"));
      }
      if (!is_name("in")) fail_here("expected 'in' in '{% for %}', found " + describe(peek()));
      next();
      s->expr = or_expr();
      if (is_name("if")) {
        next();
        s->cond = or_expr();
      }
      if (is_name("recursive")) fail_here("unsupported 'recursive' loop");
      expect_close();
      ++loop_depth_;
      s->body = block({"else", "endfor"});
      --loop_depth_;
      if (peek().type == Tok::kOpenStmt && is_name("else", 1)) {
        next(), next();
        expect_close();
        s->orelse = block({"endfor"});
      }
      end_tag("endfor", "for", line);
    } else if (name == "set") {
      next();
      s->kind = StmtKind::kSet;
      s->names.push_back(expect_name("a variable name"));
      if (is_op(".")) {
        next();
        s->text = expect_name("an attribute name");
      } else {
        while (is_op(",")) {
          next();
          s->names.push_back(expect_name("a variable name"));
        }
      }
      if (peek().type == Tok::kCloseStmt && s->names.size() == 1 && s->text.empty()) {  // block set
        next();
        s->body = block({"endset"});
        end_tag("endset", "set", line);
        return s;
      }
      expect_op("=");
      s->expr = expression();
      expect_close();
    } else if (name == "macro") {
      next();
      s->kind = StmtKind::kMacro;
      s->text = expect_name("a macro name");
      macros_.insert(s->text);
      expect_op("(");
      while (!is_op(")")) {
        std::string param = expect_name("a parameter name");
        ExprPtr def;
        if (is_op("=")) {
          next();
          def = expression();
        }
        s->params.emplace_back(std::move(param), std::move(def));
        if (!is_op(",")) break;
        next();
      }
      expect_op(")");
      expect_close();
      s->body = block({"endmacro"});
      end_tag("endmacro", "macro", line);
    } else if (name == "generation") {  // transformers' marker of the assistant's tokens: its body as it is
      next();
      expect_close();
      s->kind = StmtKind::kIf;
      s->expr = make(ExprKind::kLiteral, line);
      s->expr->value = Value::boolean(true);
      s->body = block({"endgeneration"});
      end_tag("endgeneration", "generation", line);
    } else if (name == "break" || name == "continue") {
      next();
      if (loop_depth_ == 0) template_fail("'{% " + name + " %}' outside a loop", line);
      s->kind = name == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      expect_close();
    } else if (name == "elif" || name == "else" || name.rfind("end", 0) == 0) {
      template_fail("unexpected '{% " + name + " %}'", line);
    } else if (name.empty()) {
      template_fail("expected a statement name after '{%', found " + describe(peek()), line);
    } else {
      template_fail("unsupported statement '{% " + name + " %}'", line);
    }
    return s;
  }

  // After {% if: condition %} body [elif ...] [else ...] {% endif %}.
  StmtPtr if_rest(int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::kIf;
    s->line = line;
    s->expr = expression();
    expect_close();
    s->body = block({"elif", "else", "endif"});
    if (peek().type == Tok::kOpenStmt && is_name("elif", 1)) {
      const int elif_line = next().line;
      next();
      s->orelse.push_back(if_rest(elif_line));  // consumes the endif
      return s;
    }
    if (peek().type == Tok::kOpenStmt && is_name("else", 1)) {
      next(), next();
      expect_close();
      s->orelse = block({"endif"});
    }
    end_tag("endif", "if", line);
    return s;
  }

  // ---- expressions, lowest precedence first (Jinja's order) ----
  ExprPtr expression() {
    DepthGuard guard(*this);
    ExprPtr e = or_expr();
    if (!is_name("if")) return e;
    auto t = make(ExprKind::kTernary, next().line);
    t->object = std::move(e);
    t->items.push_back(or_expr());
    if (is_name("else")) {
      next();
      t->items.push_back(expression());
    } else {
      t->items.push_back(nullptr);
    }
    return t;
  }

  ExprPtr binary(ExprPtr left, std::string op, ExprPtr right, int line) {
    auto b = make(ExprKind::kBinary, line);
    b->name = std::move(op);
    b->object = std::move(left);
    b->items.push_back(std::move(right));
    return b;
  }

  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (is_name("or")) {
      const int line = next().line;
      e = binary(std::move(e), "or", and_expr(), line);
    }
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (is_name("and")) {
      const int line = next().line;
      e = binary(std::move(e), "and", not_expr(), line);
    }
    return e;
  }
  ExprPtr not_expr() {
    if (!is_name("not")) return compare();
    DepthGuard guard(*this);
    auto u = make(ExprKind::kUnary, next().line);
    u->name = "not";
    u->object = not_expr();
    return u;
  }
  ExprPtr compare() {
    ExprPtr e = concat();
    for (;;) {
      const Token& t = peek();
      std::string op;
      if (t.type == Tok::kOp && (t.value == "==" || t.value == "!=" || t.value == "<" || t.value == ">" ||
                                 t.value == "<=" || t.value == ">="))
        op = t.value;
      else if (is_name("in"))
        op = "in";
      else if (is_name("not") && is_name("in", 1))
        op = "not in";
      else
        return e;
      const int line = next().line;
      if (op == "not in") next();
      e = binary(std::move(e), op, concat(), line);
    }
  }
  ExprPtr concat() {
    ExprPtr e = additive();
    while (is_op("~")) {
      const int line = next().line;
      e = binary(std::move(e), "~", additive(), line);
    }
    return e;
  }
  ExprPtr additive() {
    ExprPtr e = multiplicative();
    while (is_op("+") || is_op("-")) {
      const Token t = next();
      e = binary(std::move(e), t.value, multiplicative(), t.line);
    }
    return e;
  }
  ExprPtr multiplicative() {
    ExprPtr e = power();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token t = next();
      e = binary(std::move(e), t.value, power(), t.line);
    }
    return e;
  }
  ExprPtr power() {
    ExprPtr e = unary();
    while (is_op("**")) {
      const int line = next().line;
      e = binary(std::move(e), "**", unary(), line);
    }
    return e;
  }
  ExprPtr unary() {
    if (is_op("-") || is_op("+")) {
      DepthGuard guard(*this);
      const Token t = next();
      auto u = make(ExprKind::kUnary, t.line);
      u->name = t.value;
      u->object = unary();
      return u;
    }
    return filtered(postfix(primary()));
  }

  // Filters and tests after an operand: x | f(args) | g, x is [not] t(args).
  ExprPtr filtered(ExprPtr e) {
    for (;;) {
      if (is_op("|")) {
        const int line = next().line;
        auto f = make(ExprKind::kFilter, line);
        f->name = expect_name("a filter name");
        if (!is_known_filter(f->name)) template_fail("unsupported filter '" + f->name + "'", line);
        f->object = std::move(e);
        if (is_op("(")) call_args(*f);
        std::vector<std::string> keys;
        for (const auto& kw : f->kwargs) keys.push_back(kw.first);
        check_filter_kwargs(f->name, keys, line);
        e = postfix(std::move(f));
      } else if (is_name("is")) {
        const int line = next().line;
        auto t = make(ExprKind::kTest, line);
        if (is_name("not")) {
          next();
          t->negated = true;
        }
        t->name = expect_name("a test name");
        if (!is_known_test(t->name)) template_fail("unsupported test '" + t->name + "'", line);
        t->object = std::move(e);
        if (is_op("(")) {
          call_args(*t);
        } else if (starts_test_argument()) {
          t->items.push_back(postfix(primary()));
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }
  bool starts_test_argument() const {
    const Token& t = peek();
    if (t.type == Tok::kString || t.type == Tok::kInt || t.type == Tok::kFloat) return true;
    if (t.type != Tok::kName) return false;
    static const std::set<std::string> stop = {"and", "or", "else", "if", "in", "not", "is"};
    return !stop.count(t.value);
  }

  // ( args, name=value ) into e.items / e.kwargs.
  void call_args(Expr& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().type == Tok::kName && is_op("=", 1)) {
        std::string key = next().value;
        next();
        e.kwargs.emplace_back(std::move(key), expression());
      } else {
        if (!e.kwargs.empty()) fail_here("positional argument after a keyword argument");
        e.items.push_back(expression());
      }
      if (!is_op(",")) break;
      next();
    }
    expect_op(")");
  }

  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      if (is_op(".")) {
        const int line = next().line;
        auto a = make(ExprKind::kAttr, line);
        if (peek().type == Tok::kInt) {  // x.0 as x[0]
          a->kind = ExprKind::kIndex;
          auto idx = make(ExprKind::kLiteral, line);
          idx->value = Value::integer(std::stoll(next().value));
          a->items.push_back(std::move(idx));
        } else {
          a->name = expect_name("an attribute name");
        }
        a->object = std::move(e);
        e = std::move(a);
      } else if (is_op("[")) {
        e = subscript(std::move(e));
      } else if (is_op("(")) {
        auto c = make(ExprKind::kCall, peek().line);
        if (e->kind == ExprKind::kAttr && !is_known_method(e->name))
          template_fail("unsupported method '" + e->name + "'", e->line);
        if (e->kind == ExprKind::kName) called_names_.emplace_back(e->name, e->line);
        c->object = std::move(e);
        call_args(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr e) {
    const int line = next().line;  // [
    ExprPtr parts[3];
    int colons = 0;
    for (;;) {
      if (is_op("]")) break;
      if (is_op(":")) {
        if (++colons > 2) fail_here("too many ':' in a slice");
        next();
        continue;
      }
      if (parts[colons]) fail_here("expected ']' or ':', found " + describe(peek()));
      parts[colons] = expression();
    }
    next();  // ]
    auto s = make(colons > 0 ? ExprKind::kSlice : ExprKind::kIndex, line);
    s->object = std::move(e);
    if (colons == 0) {
      if (!parts[0]) template_fail("empty subscript '[]'", line);
      s->items.push_back(std::move(parts[0]));
    } else {
      for (auto& p : parts) s->items.push_back(std::move(p));
    }
    return s;
  }

  ExprPtr primary() {
    const Token t = next();
    auto lit = [&](Value v) {
      auto e = make(ExprKind::kLiteral, t.line);
      e->value = std::move(v);
      return e;
    };
    switch (t.type) {
      case Tok::kString: {
        std::string s = t.value;
        while (peek().type == Tok::kString) s += next().value;  // 'a' 'b' is 'ab'
        return lit(Value::string(std::move(s)));
      }
      case Tok::kInt: return lit(Value::integer(std::stoll(t.value)));
      case Tok::kFloat: return lit(Value::number(std::stod(t.value)));
      case Tok::kName: {
        if (t.value == "true" || t.value == "True") return lit(Value::boolean(true));
        if (t.value == "false" || t.value == "False") return lit(Value::boolean(false));
        if (t.value == "none" || t.value == "None") return lit(Value::none());
        auto e = make(ExprKind::kName, t.line);
        e->name = t.value;
        return e;
      }
      case Tok::kOp:
        if (t.value == "(") {
          ExprPtr first = expression();
          if (!is_op(",")) {
            expect_op(")");
            return first;
          }
          auto tuple = make(ExprKind::kTuple, t.line);
          tuple->items.push_back(std::move(first));
          while (is_op(",")) {
            next();
            if (is_op(")")) break;
            tuple->items.push_back(expression());
          }
          expect_op(")");
          return tuple;
        }
        if (t.value == "[") {
          auto list = make(ExprKind::kList, t.line);
          while (!is_op("]")) {
            list->items.push_back(expression());
            if (!is_op(",")) break;
            next();
          }
          expect_op("]");
          return list;
        }
        if (t.value == "{") {
          auto dict = make(ExprKind::kDict, t.line);
          while (!is_op("}")) {
            dict->items.push_back(expression());
            expect_op(":");
            dict->items.push_back(expression());
            if (!is_op(",")) break;
            next();
          }
          expect_op("}");
          return dict;
        }
        break;
      default: break;
    }
    template_fail("expected an expression, found " + describe(t), t.line);
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int loop_depth_ = 0;
  int depth_ = 0;
  std::set<std::string> macros_;
  std::vector<std::pair<std::string, int>> called_names_;
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(tokenize(source)).run(); }

}  // namespace mt::chat
