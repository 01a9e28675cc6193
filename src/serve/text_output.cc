#include "serve/text_output.h"

#include <algorithm>

namespace mt::serve {

TextOutput::TextOutput(const Tokenizer& tok, std::vector<std::string> stop,
                       std::vector<int32_t> hidden)
    : detok_(tok), stop_(std::move(stop)), hidden_(std::move(hidden)) {
  std::erase(stop_, std::string());
}

std::string TextOutput::push(int32_t id) {
  if (stopped_) return "";
  ++tokens_;
  if (std::find(hidden_.begin(), hidden_.end(), id) != hidden_.end()) return "";
  return release(held_ + detok_.push(id));
}

std::string TextOutput::finish() {
  if (stopped_) return "";
  std::string rest = release(held_ + detok_.finish());
  if (stopped_) return rest;
  rest += held_;  // generation ended: a partial stop string is text after all
  held_.clear();
  return rest;
}

std::string TextOutput::release(std::string text) {
  held_.clear();
  size_t cut = std::string::npos;
  for (const std::string& s : stop_) cut = std::min(cut, text.find(s));
  if (cut != std::string::npos) {
    stopped_ = true;
    return text.substr(0, cut);
  }
  // Hold back the longest tail that begins some stop string.
  size_t keep = 0;
  for (const std::string& s : stop_)
    for (size_t n = std::min(s.size() - 1, text.size()); n > keep; --n)
      if (text.compare(text.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
  held_ = text.substr(text.size() - keep);
  text.resize(text.size() - keep);
  return text;
}

}  // namespace mt::serve
