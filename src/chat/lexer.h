// Chat-template lexer: template text -> tokens, each with its 1-based line.
// Whitespace as transformers renders chat templates (trim_blocks and
// lstrip_blocks on, the template's one trailing newline dropped), plus Jinja's
// `{%- -%}`, `{{- -}}` and `{#- -#}` controls. Comments are dropped here.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace mt::chat {

enum class Tok {
  kText,        // text outside tags (value: the text)
  kOpenStmt,    // {%
  kCloseStmt,   // %}
  kOpenExpr,    // {{
  kCloseExpr,   // }}
  kName,        // identifiers and keywords (value: the name)
  kString,      // string literal (value: unescaped text)
  kInt,         // integer literal (value: digits)
  kFloat,       // float literal (value: digits.digits)
  kOp,          // punctuation and operators (value: "(", "==", "//", ...)
  kEnd,         // end of the template
};

struct Token {
  Tok type;
  std::string value;
  int line;
};

// Throws TemplateError naming the bad character or the unclosed construct and its line.
std::vector<Token> tokenize(std::string_view source);

}  // namespace mt::chat
