#include "data/hf_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"

namespace mt {

namespace {

// Per-thread match data (tokenizers are shared between preprocess's worker
// threads; pcre2_match_data is not). One pair of offsets is all find_all
// reads, so one block serves every pattern.
struct MatchData {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  ~MatchData() { pcre2_match_data_free(data); }
};

}  // namespace

struct HfRegex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() {
    if (code != nullptr) pcre2_code_free(code);
  }
};

std::string hf_regex_translate(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char n = p[i + 1];
      ++i;
      if (n == 's') {
        out += in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
      } else if (n == 'S' && !in_class) {
        out += "[^\\s\\x{85}]";
      } else {
        out += '\\';
        out += n;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' (or '^]') right after '[' is a literal, not the class's end.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

HfRegex::HfRegex(const std::string& pattern, const std::string& where)
    : impl_(std::make_unique<Impl>()), pattern_(pattern) {
  const std::string translated = hf_regex_translate(pattern);
  int err = 0;
  PCRE2_SIZE err_off = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &err_off, nullptr);
  if (impl_->code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    MT_FAIL(where, ": the regular expression \"", pattern, "\" does not compile (",
            reinterpret_cast<const char*>(msg), " at offset ", err_off,
            "); fix: use an expression Hugging Face's tokenizers accepts");
  }
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

HfRegex::~HfRegex() = default;
HfRegex::HfRegex(HfRegex&&) noexcept = default;
HfRegex& HfRegex::operator=(HfRegex&&) noexcept = default;

void HfRegex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  thread_local MatchData cache;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t at = 0;
  while (at <= text.size()) {
    const int rc = impl_->jit ? pcre2_jit_match(impl_->code, subject, text.size(), at, 0, cache.data, nullptr)
                              : pcre2_match(impl_->code, subject, text.size(), at, PCRE2_NO_UTF_CHECK,
                                            cache.data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    // rc == 0: the match's groups did not fit, its offsets are there.
    MT_CHECK(rc >= 0, "regular expression \"", pattern_, "\" failed with PCRE2 error ", rc, " on a text of ",
             text.size(), " bytes");
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(cache.data);
    out.emplace_back(ov[0], ov[1]);
    if (ov[1] > ov[0]) {
      at = ov[1];
    } else {  // empty match: step over one UTF-8 character
      at = ov[1] + 1;
      while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
    }
  }
}

}  // namespace mt
