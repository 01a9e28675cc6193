// The regular expressions of a Hugging Face tokenizer.json (Split patterns,
// Replace patterns, ByteLevel's GPT-2 expression) through PCRE2 with
// PCRE2_UTF | PCRE2_UCP and its JIT.
//
// Hugging Face's `tokenizers` runs these patterns with Oniguruma; PCRE2 reads
// the same syntax for what tokenizer.json files use (\p{L}, \p{N}, (?i:...),
// look-ahead (?!\S), {1,3}). One difference is bridged: Oniguruma's \s is
// Unicode's White_Space, which holds U+0085 (NEL) that PCRE2 10.42's \s lacks,
// so \s and \S are rewritten to include it (hf_regex_translate).
//
// Why PCRE2 (Debian's libpcre2-dev) and not std::regex or a hand-written
// engine: std::regex has no \p{..} classes and is slow; a hand-written scanner
// (as GPT-2's) fits one fixed pattern, while tokenizer.json carries its own.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mt {

class HfRegex {
 public:
  // Compiles `pattern` (an Oniguruma-syntax expression from `where`, named in
  // errors). Throws with PCRE2's message and offset when it does not compile.
  HfRegex(const std::string& pattern, const std::string& where);
  ~HfRegex();
  HfRegex(HfRegex&&) noexcept;
  HfRegex& operator=(HfRegex&&) noexcept;

  // Every non-overlapping match in `text` (valid UTF-8), left to right, as
  // byte (begin, end); an empty match advances by one character.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;
  const std::string& pattern() const { return pattern_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string pattern_;
};

// `pattern` with \s and \S extended by U+0085 (see above).
std::string hf_regex_translate(std::string_view pattern);

}  // namespace mt
