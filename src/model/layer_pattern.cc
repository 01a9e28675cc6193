#include "model/layer_pattern.h"

#include <cctype>

#include "core/error.h"

namespace mt {
namespace {

// Recursive descent over the pattern's text; every error names the flag, the
// pattern and the character where reading stopped.
class PatternReader {
 public:
  PatternReader(const std::string& flag, const std::string& text) : flag_(flag), s_(text) {}

  std::vector<int64_t> read() {
    for (char ch : s_)
      MT_CHECK(std::isdigit(static_cast<unsigned char>(ch)) || ch == ',' || ch == '[' ||
                   ch == ']' || ch == '(' || ch == ')' || ch == '+' || ch == '*',
               flag_, " '", s_, "': '", std::string(1, ch),
               "' is not allowed (Megatron reads only digits, commas, brackets, parentheses, + "
               "and *); fix: write the pattern as e.g. [0]*3+[1]*5 or [0,1,1,1], without spaces");
    std::vector<int64_t> out = expr();
    expect(pos_ == s_.size(), "text after the pattern's end");
    return out;
  }

 private:
  std::vector<int64_t> expr() {
    std::vector<int64_t> out = term();
    while (peek('+')) {
      ++pos_;
      const std::vector<int64_t> more = term();
      out.insert(out.end(), more.begin(), more.end());
    }
    return out;
  }

  std::vector<int64_t> term() {
    if (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {  // N * term
      const int64_t n = count();
      expect(peek('*'), "a number outside a list not followed by *");
      ++pos_;
      return repeated(term(), n);
    }
    std::vector<int64_t> out = factor();
    while (peek('*')) {
      ++pos_;
      out = repeated(out, count());
    }
    return out;
  }

  std::vector<int64_t> factor() {
    if (peek('(')) {
      ++pos_;
      std::vector<int64_t> out = expr();
      expect(peek(')'), "a '(' without its ')'");
      ++pos_;
      return out;
    }
    expect(peek('['), "a list ('[') expected");
    ++pos_;
    std::vector<int64_t> out;
    for (;;) {
      out.push_back(count());
      if (peek(',')) {
        ++pos_;
        continue;
      }
      expect(peek(']'), "a '[' without its ']'");
      ++pos_;
      return out;
    }
  }

  int64_t count() {
    expect(pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_])),
           "a number expected");
    int64_t n = 0;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      n = n * 10 + (s_[pos_++] - '0');
      expect(n <= 1000000, "a number over 1000000");
    }
    return n;
  }

  std::vector<int64_t> repeated(const std::vector<int64_t>& x, int64_t n) {
    expect(int64_t(x.size()) * n <= 1000000, "a pattern of over 1000000 entries");
    std::vector<int64_t> out;
    out.reserve(x.size() * size_t(n));
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), x.begin(), x.end());
    return out;
  }

  bool peek(char ch) const { return pos_ < s_.size() && s_[pos_] == ch; }

  void expect(bool ok, const char* what) const {
    MT_CHECK(ok, flag_, " '", s_, "' cannot be read at character ", pos_ + 1, ": ", what,
             "; fix: a Python list expression such as [0]*3+[1]*5, ([0]+[1]*23) or [0,1,1,1]");
  }

  const std::string& flag_;
  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<int64_t> eval_layer_pattern(const std::string& flag, const std::string& pattern) {
  return PatternReader(flag, pattern).read();
}

}  // namespace mt
