// A request's shown text (serve/text_output.h): stop strings cut it before
// the first match, a tail that may begin one is held back until it cannot,
// stop tokens are not shown, and streaming pieces join to the whole.
#include <gtest/gtest.h>

#include "data/char_tokenizer.h"
#include "serve/text_output.h"

namespace mt::serve {
namespace text_output_test {

std::string feed(const Tokenizer& tok, TextOutput& out, const std::string& text,
                 std::vector<std::string>* pieces = nullptr) {
  std::string shown;
  for (int32_t id : tok.tokenize(text)) {
    const std::string p = out.push(id);
    if (pieces) pieces->push_back(p);
    shown += p;
    if (out.stopped()) return shown;
  }
  return shown + out.finish();
}

TEST(TextOutput, StopStringsCutTheTextAndHoldBackWhatMayBeginOne) {
  const std::unique_ptr<Tokenizer> owned =
      make_char_tokenizer(CharTokenizer::from_text("abcdefgh XY\n", true));
  const Tokenizer& tok = *owned;
  {
    TextOutput out(tok, {"XY", "\n\n"}, {});
    std::vector<std::string> pieces;
    EXPECT_EQ(feed(tok, out, "abc XdeXYfg", &pieces), "abc Xde");
    EXPECT_TRUE(out.stopped());
    // "X" after "abc " is held back until "d" shows it is no stop string.
    EXPECT_EQ(pieces[4], "");
    EXPECT_EQ(pieces[5], "Xd");
    EXPECT_EQ(out.tokens_shown(), 9);
  }
  {  // A possible start at the very end is text after all.
    TextOutput out(tok, {"XY"}, {});
    EXPECT_EQ(feed(tok, out, "abX"), "abX");
    EXPECT_FALSE(out.stopped());
  }
  {  // No stop strings: everything, at once.
    TextOutput out(tok, {}, {});
    std::vector<std::string> pieces;
    EXPECT_EQ(feed(tok, out, "ab\n\nc", &pieces), "ab\n\nc");
    EXPECT_EQ(pieces[2], "\n");
  }
  {  // A stop token (end of document) is not shown.
    TextOutput out(tok, {}, {tok.eod()});
    EXPECT_EQ(out.push(tok.tokenize("a")[0]) + out.push(tok.eod()) + out.finish(), "a");
  }
}

}  // namespace text_output_test
}  // namespace mt::serve
