// The chat-template syntax tree: expressions and statements, each with the
// template line it starts on (for error messages).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/value.h"

namespace mt::chat {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  kLiteral,  // value
  kName,     // name
  kList,     // items
  kTuple,    // items (a list at run time)
  kDict,     // items: key0, value0, key1, value1, ...
  kAttr,     // object.name
  kIndex,    // object[items[0]]
  kSlice,    // object[items[0]:items[1]:items[2]] (null items: omitted)
  kCall,     // object(items..., kwargs...)
  kFilter,   // object | name(items..., kwargs...)
  kTest,     // object is [not] name(items...)
  kUnary,    // name ("not", "-", "+") object
  kBinary,   // object name items[0]  (name: "+", "==", "in", "not in", "and", ...)
  kTernary,  // items[0] if object else items[1]  (items[1] null: no else)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value value;                  // kLiteral
  std::string name;             // identifier, attribute, filter, test or operator
  ExprPtr object;               // operand / callee / condition's subject
  std::vector<ExprPtr> items;   // arguments, elements, operands
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;         // kTest: `is not`
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class StmtKind {
  kText,      // text
  kOutput,    // {{ expr }}
  kIf,        // {% if expr %} body {% else %} orelse (elif: an kIf alone in orelse)
  kFor,       // {% for names in expr [if cond] %} body [{% else %} orelse]
  kSet,       // {% set names = expr %}, {% set name.attr = expr %} (attr), {% set name %}body{% endset %}
  kMacro,     // {% macro name(params) %} body
  kBreak,     // {% break %}
  kContinue,  // {% continue %}
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;                 // kText; kMacro: the name; kSet: attribute of names[0]
  ExprPtr expr;                     // output / condition / iterable / value
  ExprPtr cond;                     // kFor: the `if` filter
  std::vector<std::string> names;   // loop or set targets
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro (null: no default)
  Body body, orelse;
};

}  // namespace mt::chat
