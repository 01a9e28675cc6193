#include "data/char_tokenizer.h"

#include <gtest/gtest.h>

#include "data_test_util.h"

namespace mt {
namespace char_tokenizer_test {

using test::error_of;
using test::has;

TEST(Utf8, DecodeEncodeRoundTrip) {
  const std::string text = "a\xC3\xA9\xE6\x97\xA5\xF0\x9F\x98\x80\n";  // a é 日 😀 \n
  std::vector<char32_t> cps;
  utf8_decode(text, cps);
  ASSERT_EQ(cps.size(), 5u);
  EXPECT_EQ(cps[0], U'a');
  EXPECT_EQ(cps[1], 0xE9u);
  EXPECT_EQ(cps[2], 0x65E5u);
  EXPECT_EQ(cps[3], 0x1F600u);
  std::string back;
  for (char32_t cp : cps) utf8_append(cp, back);
  EXPECT_EQ(back, text);
}

TEST(Utf8, InvalidInputNamesByteOffset) {
  struct Case {
    std::string bytes;
    int offset;
  };
  const Case cases[] = {
      {"ab\xC0\x80", 2},          // overlong NUL
      {"abc\xED\xA0\x80", 3},     // UTF-16 surrogate
      {"\xF4\x90\x80\x80", 0},    // > U+10FFFF
      {"xy\xE6\x97", 2},          // truncated
      {"x\x80", 1},               // stray continuation byte
      {"\xC3\xA9z\xC3(", 3},      // bad continuation
  };
  for (const Case& c : cases) {
    std::vector<char32_t> cps;
    const std::string msg = error_of([&] { utf8_decode(c.bytes, cps, 100, "doc.txt"); });
    EXPECT_TRUE(has(msg, "byte offset " + std::to_string(100 + c.offset)) && has(msg, "doc.txt"))
        << msg;
  }
}

TEST(Utf8, CompletePrefixStopsBeforeSplitCharacter) {
  const std::string s = "ab\xE6\x97\xA5";
  EXPECT_EQ(utf8_complete_prefix(s), 5u);
  EXPECT_EQ(utf8_complete_prefix(s.substr(0, 4)), 2u);
  EXPECT_EQ(utf8_complete_prefix(s.substr(0, 3)), 2u);
  EXPECT_EQ(utf8_complete_prefix("\xF0\x9F\x98"), 0u);
  EXPECT_EQ(utf8_complete_prefix("abc"), 3u);
}

TEST(CharTokenizer, VocabIsSortedDistinctCodePointsAndRoundTrips) {
  const std::string text = "h\xC3\xA9llo w\xC3\xB6rld \xF0\x9F\x98\x80 \xE6\x97\xA5\xE6\x9C\xAC!";
  const CharTokenizer tok = CharTokenizer::from_text(text, false);
  const std::vector<char32_t> expect = {U' ', U'!', U'd', U'h', U'l', U'o', U'r', U'w',
                                        0xE9, 0xF6, 0x65E5, 0x672C, 0x1F600};
  EXPECT_EQ(tok.code_points(), expect);
  EXPECT_EQ(tok.vocab_size(), 13);
  EXPECT_EQ(tok.eod(), -1);
  const std::vector<int32_t> ids = tok.tokenize(text);
  ASSERT_EQ(ids.size(), 17u);
  EXPECT_EQ(ids[0], 3);   // 'h'
  EXPECT_EQ(ids[1], 8);   // 'é'
  EXPECT_EQ(ids[12], 12); // '😀'
  EXPECT_EQ(tok.detokenize(ids), text);
}

TEST(CharTokenizer, EodIsLastIdAndDecodesToItsText) {
  const CharTokenizer tok = CharTokenizer::from_text("ba", true);
  EXPECT_EQ(tok.vocab_size(), 3);
  EXPECT_EQ(tok.eod(), 2);
  const std::vector<int32_t> ids{1, 0, 2};
  EXPECT_EQ(tok.detokenize(ids), "ba<|endoftext|>");
  EXPECT_EQ(tok.to_json(), "[\"a\", \"b\", \"<|endoftext|>\"]");
  const CharTokenizer back = CharTokenizer::from_json(tok.to_json(), "mem");
  EXPECT_EQ(back.eod(), 2);
  EXPECT_EQ(back.vocab_size(), 3);
}

TEST(CharTokenizer, JsonMatchesPythonJsonDumps) {
  // Expected text produced by Python: json.dumps(["\t", "\n", '"', "\\", "é", "😀"]) in
  // code-point order (plus \u0000 and \u007f, which Python also escapes).
  const CharTokenizer tok = CharTokenizer::from_code_points(
      {U'\\', 0x1F600, U'\n', U'"', 0xE9, U'\t', 0, 0x7F}, false);
  const std::string expect =
      "[\"\\u0000\", \"\\t\", \"\\n\", \"\\\"\", \"\\\\\", \"\\u007f\", \"\\u00e9\", "
      "\"\\ud83d\\ude00\"]";
  EXPECT_EQ(tok.to_json(), expect);
  const CharTokenizer back = CharTokenizer::from_json(expect, "mem");
  EXPECT_EQ(back.code_points(), tok.code_points());
}

TEST(CharTokenizer, SaveLoad) {
  test::TempDir dir;
  const CharTokenizer tok = CharTokenizer::from_text("z\xC3\xA9\n", true);
  tok.save(dir.file("vocab.json"));
  const CharTokenizer back = CharTokenizer::load(dir.file("vocab.json"));
  EXPECT_EQ(back.code_points(), tok.code_points());
  EXPECT_EQ(back.eod(), tok.eod());
}

TEST(CharTokenizer, UnknownCharacterAndBadVocabAreErrors) {
  const CharTokenizer tok = CharTokenizer::from_text("abc", false);
  std::string msg = error_of([&] { tok.tokenize("ab\xC3\xA9"); });
  EXPECT_TRUE(has(msg, "U+00E9") && has(msg, "byte offset 2") && has(msg, "fix:")) << msg;
  msg = error_of([&] { tok.tokenize("abd"); });
  EXPECT_TRUE(has(msg, "U+0064 'd'")) << msg;
  msg = error_of([&] { tok.tokenize("a\xFF"); });
  EXPECT_TRUE(has(msg, "invalid UTF-8") && has(msg, "byte offset 1")) << msg;
  const std::vector<int32_t> bad{0, 3};
  EXPECT_TRUE(has(error_of([&] { tok.detokenize(bad); }), "token id 3"));
  EXPECT_THROW(CharTokenizer::from_json("[\"ab\"]", "v.json"), Error);
  EXPECT_THROW(CharTokenizer::from_json("[\"a\", \"a\"]", "v.json"), Error);
  EXPECT_THROW(CharTokenizer::from_json("{\"a\": 1}", "v.json"), Error);
  EXPECT_THROW(CharTokenizer::from_json("[\"<|endoftext|>\", \"a\"]", "v.json"), Error);
}

TEST(CharTokenizer, SharedVocabReadsAndWritesBackIdentically) {
  const std::string rel = "megatron-indexed/vocab.json";
  if (!test::shared_file_exists(rel))
    GTEST_SKIP() << "shared data not found at " << MT_SHARED_DATA << "/" << rel << "; skipping";
  const std::string text = test::read_file(test::shared_data(rel));
  const CharTokenizer tok = CharTokenizer::from_json(text, rel);
  EXPECT_EQ(tok.vocab_size(), 65);
  EXPECT_EQ(tok.id_of(U'\n'), 0);
  EXPECT_EQ(tok.id_of(U'F'), 18);
  EXPECT_EQ(tok.id_of(U'z'), 64);
  EXPECT_EQ(tok.to_json(), text);
}

TEST(NullTokenizer, MegatronSemantics) {
  // megatron/training/tokenizer/tokenizer.py _NullTokenizer: vocab_size = N + 1, eod = N.
  const NullTokenizer tok(1000);
  EXPECT_EQ(tok.vocab_size(), 1001);
  EXPECT_EQ(tok.eod(), 1000);
  const std::vector<int32_t> ids = tok.tokenize("5 17 999 1000");
  EXPECT_EQ(ids, (std::vector<int32_t>{5, 17, 999, 1000}));
  EXPECT_EQ(tok.detokenize(ids), "5 17 999 1000");
  EXPECT_THROW(tok.tokenize("5 1001"), Error);
  EXPECT_THROW(tok.tokenize("5 x"), Error);
  EXPECT_THROW(NullTokenizer(0), Error);
}

}  // namespace char_tokenizer_test
}  // namespace mt
