#include "chat/lexer.h"

#include <cstdint>

#include "chat/error.h"

namespace mt::chat {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word(char c) { return is_digit(c) || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {
    if (!src_.empty() && src_.back() == '\n') src_.remove_suffix(1);  // the one trailing newline
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      text();
      if (pos_ >= src_.size()) break;
      const char kind = src_[pos_ + 1];  // '%', '{' or '#'
      const bool strip_before = pos_ + 2 < src_.size() && src_[pos_ + 2] == '-';
      if (strip_before) strip_last_text();
      const int open_line = line_;
      advance(strip_before ? 3 : 2);
      if (kind == '#') {
        comment(open_line);
      } else {
        out_.push_back({kind == '%' ? Tok::kOpenStmt : Tok::kOpenExpr, kind == '%' ? "{%" : "{{", open_line});
        comment_last_ = false;
        tag(kind == '%', open_line);
      }
    }
    out_.push_back({Tok::kEnd, "", line_});
    return std::move(out_);
  }

 private:
  void advance(size_t n) {
    for (size_t k = 0; k < n && pos_ < src_.size(); ++k)
      if (src_[pos_++] == '\n') ++line_;
  }

  bool at(std::string_view s) const { return src_.substr(pos_, s.size()) == s; }

  // Text up to the next {% {{ {#, with trim_blocks, lstrip_blocks and a
  // preceding -%} applied.
  void text() {
    const size_t start = pos_;
    const size_t tokens_before = out_.size();
    size_t end = start;
    while (end < src_.size() &&
           !(src_[end] == '{' && end + 1 < src_.size() &&
             (src_[end + 1] == '%' || src_[end + 1] == '{' || src_[end + 1] == '#')))
      ++end;
    std::string_view t = src_.substr(start, end - start);
    const int text_line = line_;
    advance(end - start);
    // lstrip_blocks: spaces and tabs between a line start and a {% or {#.
    if (end < src_.size() && src_[end + 1] != '{') {
      const size_t nl = t.find_last_of("\n\r");
      const size_t from = nl == std::string_view::npos ? 0 : nl + 1;
      if (nl != std::string_view::npos || start == 0) {
        if (t.find_first_not_of(" \t", from) == std::string_view::npos) t = t.substr(0, from);
      }
    }
    // trim_blocks: the newline right after %} or #}.
    if (after_block_ && !t.empty() && t.front() == '\n') t.remove_prefix(1);
    // -%} / -}} / -#}: all whitespace after the tag.
    if (strip_next_)
      while (!t.empty() && is_space(t.front())) t.remove_prefix(1);
    after_block_ = strip_next_ = false;
    if (!t.empty()) out_.push_back({Tok::kText, std::string(t), text_line});
    if (out_.size() != tokens_before) comment_last_ = false;
  }

  // {%- / {{- / {#-: whitespace at the end of the text before the tag (not
  // across a comment, as the reference).
  void strip_last_text() {
    if (comment_last_ || out_.empty() || out_.back().type != Tok::kText) return;
    std::string& t = out_.back().value;
    while (!t.empty() && is_space(t.back())) t.pop_back();
    if (t.empty()) out_.pop_back();
  }

  void comment(int open_line) {
    const size_t close = src_.find("#}", pos_);
    if (close == std::string_view::npos) template_fail("unclosed comment '{#'", open_line);
    strip_next_ = close > pos_ && src_[close - 1] == '-';
    advance(close + 2 - pos_);
    after_block_ = true;
    comment_last_ = true;
  }

  // Tokens inside {% ... %} (stmt) or {{ ... }} up to the closer.
  void tag(bool stmt, int open_line) {
    int curly_depth = 0;
    for (;;) {
      while (pos_ < src_.size() && is_space(src_[pos_])) advance(1);
      if (pos_ >= src_.size())
        template_fail(std::string("unclosed '") + (stmt ? "{%" : "{{") + "' (no '" + (stmt ? "%}" : "}}") + "')",
                      open_line);
      const std::string closer = stmt ? "%}" : "}}";
      if (at("-" + closer) || (at(closer) && (stmt || curly_depth == 0))) {
        strip_next_ = src_[pos_] == '-';
        advance(strip_next_ ? 3 : 2);
        out_.push_back({stmt ? Tok::kCloseStmt : Tok::kCloseExpr, closer, line_});
        after_block_ = stmt;
        return;
      }
      const char c = src_[pos_];
      if (c == '\'' || c == '"') {
        string_literal(c);
      } else if (is_digit(c)) {
        number();
      } else if (is_word(c)) {
        size_t end = pos_;
        while (end < src_.size() && is_word(src_[end])) ++end;
        out_.push_back({Tok::kName, std::string(src_.substr(pos_, end - pos_)), line_});
        advance(end - pos_);
      } else {
        static const char* kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                     ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|"};
        bool found = false;
        for (const char* op : kOps) {
          if (!at(op)) continue;
          if (op[0] == '{' && op[1] == 0) ++curly_depth;
          if (op[0] == '}' && op[1] == 0) --curly_depth;
          out_.push_back({Tok::kOp, op, line_});
          advance(std::string_view(op).size());
          found = true;
          break;
        }
        if (!found) template_fail(std::string("unexpected character '") + c + "'", line_);
      }
    }
  }

  void string_literal(char quote) {
    const int start_line = line_;
    advance(1);
    std::string s;
    for (;;) {
      if (pos_ >= src_.size()) template_fail("unterminated string literal", start_line);
      const char c = src_[pos_];
      if (c == quote) break;
      if (c != '\\') {
        s += c;
        advance(1);
        continue;
      }
      if (pos_ + 1 >= src_.size()) template_fail("unterminated string literal", start_line);
      const char e = src_[pos_ + 1];
      advance(2);
      switch (e) {
        case 'n': s += '\n'; break;
        case 't': s += '\t'; break;
        case 'r': s += '\r'; break;
        case 'b': s += '\b'; break;
        case 'f': s += '\f'; break;
        case 'v': s += '\v'; break;
        case '\'': case '"': case '\\': s += e; break;
        case 'x':
        case 'u': {
          const size_t n = e == 'x' ? 2 : 4;
          uint32_t cp = 0;
          for (size_t k = 0; k < n; ++k) {
            const int h = pos_ + k < src_.size() ? hex_value(src_[pos_ + k]) : -1;
            if (h < 0) template_fail(std::string("bad escape '\\") + e + "' in a string literal", line_);
            cp = cp * 16 + static_cast<uint32_t>(h);
          }
          advance(n);
          append_utf8(cp, s);
          break;
        }
        default: template_fail(std::string("unknown escape '\\") + e + "' in a string literal", line_);
      }
    }
    advance(1);
    out_.push_back({Tok::kString, std::move(s), start_line});
  }

  void number() {
    size_t end = pos_;
    while (end < src_.size() && is_digit(src_[end])) ++end;
    const bool after_dot = !out_.empty() && out_.back().type == Tok::kOp && out_.back().value == ".";
    bool is_float = false;
    if (!after_dot && end + 1 < src_.size() && src_[end] == '.' && is_digit(src_[end + 1])) {
      is_float = true;
      ++end;
      while (end < src_.size() && is_digit(src_[end])) ++end;
    }
    out_.push_back({is_float ? Tok::kFloat : Tok::kInt, std::string(src_.substr(pos_, end - pos_)), line_});
    advance(end - pos_);
  }

  std::string_view src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool after_block_ = false;  // the last tag was %} or #} (trim_blocks)
  bool strip_next_ = false;   // the last tag ended with -%}, -}} or -#}
  bool comment_last_ = false; // a comment came after the last token
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace mt::chat
