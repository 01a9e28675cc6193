// The text of one request's new tokens as a client sees it: decoded as they
// come (a character split over tokens appears once complete), a stop token
// not shown, and the text cut before the first stop string, holding back
// any tail that could still become one (OpenAI's `stop`). The HTTP thread
// owns one per request; streamed and whole answers go through the same one,
// so they are the same text.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace mt::serve {

class TextOutput {
 public:
  TextOutput(const Tokenizer& tok, std::vector<std::string> stop, std::vector<int32_t> hidden);
  // The text that may be shown after token `id` (possibly empty).
  std::string push(int32_t id);
  // The rest, once generation has ended (what was held back, unless stopped).
  std::string finish();
  // A stop string matched: show nothing more, and cancel the request.
  bool stopped() const { return stopped_; }
  // Tokens whose text was shown (up to the one that completed a stop string).
  int64_t tokens_shown() const { return tokens_; }

 private:
  std::string release(std::string text);

  StreamingDetokenizer detok_;
  std::vector<std::string> stop_;
  std::vector<int32_t> hidden_;
  std::string held_;
  bool stopped_ = false;
  int64_t tokens_ = 0;
};

}  // namespace mt::serve
