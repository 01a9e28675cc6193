// HuggingFaceTokenizer stage by stage, on small tokenizer.json files written
// here: normalizers, pre-tokenizers (split behaviors), BPE (merge ranks,
// ignore_merges, byte_fallback, unk and fuse_unk), added tokens (lstrip,
// rstrip, single_word, normalized), decoders, post-processors, and the
// refusals of what is not built (each by its name and file).
#include "data/hf_tokenizer.h"

#include <gtest/gtest.h>
#include <utf8proc.h>

#include <filesystem>
#include <string>
#include <vector>

#include "data/char_tokenizer.h"
#include "data/hf_decoders.h"
#include "data/hf_normalizers.h"
#include "data/hf_pretokenizers.h"
#include "data/hf_regex.h"
#include "data/hf_text.h"
#include "data_test_util.h"

namespace mt {
namespace hf_tokenizer_test {

using nlohmann::json;
using test::error_of;
using test::has;
using test::TempDir;
using test::write_file;

std::string normalize(const json& j, const std::string& text) {
  return hf_normalize(hf_normalizer_from_json(j, "test"), text);
}

std::vector<std::string> pre_tokenize(const json& j, const std::string& text, bool at_start = true) {
  std::vector<HfPiece> pieces{{text, at_start}};
  hf_pre_tokenize(hf_pre_tokenizer_from_json(j, "test"), pieces);
  std::vector<std::string> out;
  for (const HfPiece& p : pieces) out.push_back(p.text);
  return out;
}

std::vector<std::string> decode_chain(const json& j, std::vector<std::string> tokens) {
  hf_decode_chain(hf_decoder_from_json(j, "test"), tokens);
  return tokens;
}

// A tokenizer.json over the characters a b c (+ extras) with `merges`.
json tiny(json merges, json extra_vocab = json::object()) {
  json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}, {" ", 6}};
  for (auto it = extra_vocab.begin(); it != extra_vocab.end(); ++it) vocab[it.key()] = it.value();
  return {{"version", "1.0"},
          {"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder", nullptr},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", merges}}}};
}

// Writes `j` (and `config` unless null) into a fresh folder of `dir`; returns it.
std::string write_tokenizer(const TempDir& dir, const json& j, const json& config = nullptr) {
  static int n = 0;
  const std::string folder = dir.file("tok" + std::to_string(n++));
  std::filesystem::create_directories(folder);
  write_file(folder + "/tokenizer.json", j.dump());
  if (!config.is_null()) write_file(folder + "/tokenizer_config.json", config.dump());
  return folder;
}

std::vector<int32_t> encode(const json& j, const std::string& text, const json& config = nullptr) {
  TempDir dir;
  return HuggingFaceTokenizer(write_tokenizer(dir, j, config)).tokenize(text);
}

using Ids = std::vector<int32_t>;
using Strs = std::vector<std::string>;

TEST(HfNormalizers, EachTypeDoesWhatTokenizersDoes) {
  EXPECT_EQ(normalize({{"type", "NFC"}}, "e\xCC\x81"), "\xC3\xA9");  // e + U+0301 -> é
  EXPECT_EQ(normalize({{"type", "NFD"}}, "\xC3\xA9"), "e\xCC\x81");
  EXPECT_EQ(normalize({{"type", "NFKC"}}, "\xEF\xAC\x81 \xE2\x91\xA0"), "fi 1");  // ﬁ ① -> fi 1
  EXPECT_EQ(normalize({{"type", "NFKD"}}, "\xEF\xAC\x81"), "fi");
  EXPECT_EQ(normalize({{"type", "Lowercase"}}, "HeLLo \xC3\x89\xCE\xA3"), "hello \xC3\xA9\xCF\x83");
  EXPECT_EQ(normalize({{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}}, " \t x \n"), "x \n");
  EXPECT_EQ(normalize({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}, "\xE3\x80\x80 x \n"),
            "x");
  EXPECT_EQ(
      normalize({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}, "a b  c"),
      "a\xE2\x96\x81"
      "b\xE2\x96\x81\xE2\x96\x81"
      "c");
  EXPECT_EQ(normalize({{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}}, "a b    c"),
            "a b c");
  EXPECT_EQ(normalize({{"type", "Prepend"}, {"prepend", "_"}}, "ab"), "_ab");
  EXPECT_EQ(normalize({{"type", "Prepend"}, {"prepend", "_"}}, ""), "");
  EXPECT_EQ(normalize({{"type", "Sequence"},
                       {"normalizers", {{{"type", "Lowercase"}}, {{"type", "Prepend"}, {"prepend", "#"}}}}},
                      "AB"),
            "#ab");
}

// The fast path (text left alone when no character can change) agrees with
// utf8proc's full NFC / NFKC on every code point, alone and after starters.
TEST(HfNormalizers, FastPathAgreesWithFullNormalizationOnEveryCodePoint) {
  const HfNormalizer nfc = hf_normalizer_from_json({{"type", "NFC"}}, "test");
  const HfNormalizer nfkc = hf_normalizer_from_json({{"type", "NFKC"}}, "test");
  auto full = [](const std::string& s, int options) {
    utf8proc_uint8_t* out = nullptr;
    const auto n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), utf8proc_ssize_t(s.size()), &out,
                     utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE | options));
    std::string r(reinterpret_cast<const char*>(out), size_t(n));
    std::free(out);
    return r;
  };
  size_t mismatches = 0;
  for (char32_t cp = 0x80; cp < 0x32000; ++cp) {
    if (cp >= 0xD800 && cp < 0xE000) continue;
    // e, 가, ά (precomposed), ᄀ (Hangul L), ො's first half (Sinhala U+0DD9)
    for (const char* prefix : {"", "e", "\xEA\xB0\x80", "\xCE\xAC", "\xE1\x84\x80", "\xE0\xB7\x99"}) {
      std::string s = prefix;
      utf8_append(cp, s);
      if (hf_normalize(nfc, s) != full(s, 0) && ++mismatches <= 5)
        ADD_FAILURE() << "NFC of U+" << std::hex << uint32_t(cp);
      if (hf_normalize(nfkc, s) != full(s, UTF8PROC_COMPAT) && ++mismatches <= 5)
        ADD_FAILURE() << "NFKC of U+" << std::hex << uint32_t(cp);
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(HfPreTokenizers, SplitBehaviorsCutAsTokenizers) {
  auto split = [](const std::string& behavior, bool invert) {
    return pre_tokenize(
        {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", invert}},
        "a-b--c");
  };
  EXPECT_EQ(split("Isolated", false), (Strs{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(split("Removed", false), (Strs{"a", "b", "c"}));
  EXPECT_EQ(split("MergedWithPrevious", false), (Strs{"a-", "b-", "-", "c"}));
  EXPECT_EQ(split("MergedWithNext", false), (Strs{"a", "-b", "-", "-c"}));
  EXPECT_EQ(split("Contiguous", false), (Strs{"a", "-", "b", "--", "c"}));
  EXPECT_EQ(split("Removed", true), (Strs{"-", "-", "-"}));
  EXPECT_EQ(split("MergedWithPrevious", true), (Strs{"a", "-b", "-", "-c"}));  // letters are the matches
}

TEST(HfPreTokenizers, RegexSplitHasUnicodeClassesCaseInsensitiveGroupsAndLookAhead) {
  const json qwen = {{"type", "Split"},
                     {"pattern",
                      {{"Regex",
                        "(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                        "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
                     {"behavior", "Isolated"},
                     {"invert", false}};
  EXPECT_EQ(pre_tokenize(qwen, "IT'S \xC3\xA9t\xC3\xA9 42   x\n\n"),
            (Strs{"IT", "'S", " \xC3\xA9t\xC3\xA9", " ", "4", "2", "  ", " x", "\n\n"}));
  // U+0085 (NEL) is whitespace for \s, as in Oniguruma (tokenizers) and Unicode.
  EXPECT_EQ(
      pre_tokenize(
          {{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}, {"behavior", "Removed"}, {"invert", false}},
          "a\xC2\x85"
          "b"),
      (Strs{"a", "b"}));
  EXPECT_EQ(hf_regex_translate("[^\\s\\p{L}]\\s\\S"), "[^\\s\\x{85}\\p{L}][\\s\\x{85}][^\\s\\x{85}]");
}

TEST(HfPreTokenizers, ByteLevelMetaspaceDigitsPunctuationWhitespace) {
  EXPECT_EQ(
      pre_tokenize({{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}}, "hello world\n"),
      (Strs{"\xC4\xA0hello", "\xC4\xA0world", "\xC4\x8A"}));  // Ġhello Ġworld Ċ
  EXPECT_EQ(pre_tokenize({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}, "a b"),
            (Strs{"a\xC4\xA0"
                  "b"}));
  const json meta = {
      {"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "first"}, {"split", true}};
  EXPECT_EQ(pre_tokenize(meta, "hi you", true), (Strs{"\xE2\x96\x81hi", "\xE2\x96\x81you"}));
  EXPECT_EQ(pre_tokenize(meta, "hi you", false), (Strs{"hi", "\xE2\x96\x81you"}));
  const json never = {
      {"type", "Metaspace"}, {"replacement", "_"}, {"prepend_scheme", "never"}, {"split", false}};
  EXPECT_EQ(pre_tokenize(never, "hi you"), (Strs{"hi_you"}));
  EXPECT_EQ(pre_tokenize({{"type", "Digits"}, {"individual_digits", true}}, "a123b"),
            (Strs{"a", "1", "2", "3", "b"}));
  EXPECT_EQ(pre_tokenize({{"type", "Digits"}, {"individual_digits", false}}, "a123b"),
            (Strs{"a", "123", "b"}));
  EXPECT_EQ(pre_tokenize({{"type", "Punctuation"}}, "hi, there!"), (Strs{"hi", ",", " there", "!"}));
  EXPECT_EQ(pre_tokenize({{"type", "Whitespace"}}, "Hello, world!"), (Strs{"Hello", ",", "world", "!"}));
  EXPECT_EQ(pre_tokenize({{"type", "WhitespaceSplit"}},
                         "a  b\tc\xE3\x80\x80"
                         "d"),
            (Strs{"a", "b", "c", "d"}));
  EXPECT_EQ(
      pre_tokenize({{"type", "Sequence"},
                    {"pretokenizers",
                     {{{"type", "WhitespaceSplit"}}, {{"type", "Digits"}, {"individual_digits", true}}}}},
                   "x12 y"),
      (Strs{"x", "1", "2", "y"}));
}

TEST(HfBpe, MergesApplyLowestRankFirst) {
  EXPECT_EQ(encode(tiny({"b c", "a b"}), "abc"), (Ids{0, 4}));  // bc first, then no (a, bc) merge
  EXPECT_EQ(encode(tiny({"a b", "b c"}), "abc"), (Ids{3, 2}));
  EXPECT_EQ(encode(tiny({"b c", "a bc"}), "abc"), (Ids{5}));
  EXPECT_EQ(encode(tiny(json::array({json::array({"a", "b"})})), "abab"), (Ids{3, 3}));  // ["a", "b"] pairs
  EXPECT_EQ(encode(tiny({"a b"}), ""), (Ids{}));
}

TEST(HfBpe, IgnoreMergesTakesAWholeWordFromTheVocabulary) {
  json j = tiny(json::array());
  EXPECT_EQ(encode(j, "abc"), (Ids{0, 1, 2}));
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(encode(j, "abc"), (Ids{5}));
  EXPECT_EQ(encode(j, "abca"), (Ids{0, 1, 2, 0}));
}

TEST(HfBpe, ByteFallbackUnkAndFuseUnk) {
  json j = tiny(json::array(), {{"<unk>", 7}, {"<0xC3>", 8}, {"<0xA9>", 9}});
  j["model"]["unk_token"] = "<unk>";
  j["model"]["byte_fallback"] = true;
  EXPECT_EQ(encode(j,
                   "a\xC3\xA9"
                   "b"),
            (Ids{0, 8, 9, 1}));  // é -> <0xC3> <0xA9>
  EXPECT_EQ(encode(j,
                   "a\xC3\xB1\xC3\xB1"
                   "b"),
            (Ids{0, 7, 7, 1}));  // ñ has no byte tokens -> unk each
  j["model"]["fuse_unk"] = true;
  EXPECT_EQ(encode(j,
                   "a\xC3\xB1\xC3\xB1"
                   "b\xC3\xB1"),
            (Ids{0, 7, 1, 7}));
  j["model"]["unk_token"] = nullptr;
  EXPECT_EQ(encode(j,
                   "a\xC3\xB1"
                   "b"),
            (Ids{0, 1}));  // no unk: dropped, as tokenizers
}

TEST(HfAddedTokens, MatchedBeforeTheModelWithTheirFlags) {
  json j = tiny(json::array({"a b"}));
  j["normalizer"] = {{"type", "Lowercase"}};
  j["added_tokens"] = {{{"id", 10},
                        {"content", "<X>"},
                        {"single_word", false},
                        {"lstrip", false},
                        {"rstrip", false},
                        {"normalized", false},
                        {"special", true}},
                       {{"id", 11},
                        {"content", "cab"},
                        {"single_word", true},
                        {"lstrip", false},
                        {"rstrip", false},
                        {"normalized", true},
                        {"special", false}},
                       {{"id", 12},
                        {"content", "<L>"},
                        {"single_word", false},
                        {"lstrip", true},
                        {"rstrip", true},
                        {"normalized", false},
                        {"special", true}},
                       {{"id", 13},
                        {"content", "<X>y"},
                        {"single_word", false},
                        {"lstrip", false},
                        {"rstrip", false},
                        {"normalized", false},
                        {"special", true}}};
  EXPECT_EQ(encode(j, "ab<X>ab"), (Ids{3, 10, 3}));
  EXPECT_EQ(encode(j, "a<X>yb"), (Ids{0, 13, 1}));     // leftmost-longest
  EXPECT_EQ(encode(j, "CAB c"), (Ids{11, 6, 2}));      // normalized: found after Lowercase
  EXPECT_EQ(encode(j, "ccab"), (Ids{2, 2, 3}));        // single_word: inside a word, not matched
  EXPECT_EQ(encode(j, "a  <L>  b"), (Ids{0, 12, 1}));  // lstrip and rstrip take the spaces
  EXPECT_EQ(encode(j, "<x>"), (Ids{}));                // not normalized: case matters (< > x unknown)
  TempDir dir;
  const HuggingFaceTokenizer tok(write_tokenizer(dir, j));
  EXPECT_EQ(tok.vocab_size(), 14);
  EXPECT_EQ(tok.detokenize(Ids{0, 10, 1}), "a <X> b");  // no decoder: tokens joined by spaces
}

TEST(HfDecoders, EachTypeDoesWhatTokenizersDoes) {
  EXPECT_EQ(decode_chain({{"type", "ByteLevel"}}, {"\xC4\xA0hi", "\xC3\x83", "\xC2\xA9", "<|x|>"}),
            (Strs{" hi\xC3\xA9<|x|>"}));
  // A run of byte tokens that is not valid UTF-8 gives one U+FFFD per token.
  EXPECT_EQ(decode_chain({{"type", "ByteFallback"}}, {"a", "<0xC3>", "<0xA9>", "b", "<0xC3>", "<0xFF>", "c"}),
            (Strs{"a", "\xC3\xA9", "b", "\xEF\xBF\xBD", "\xEF\xBF\xBD", "c"}));
  EXPECT_EQ(
      decode_chain({{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}},
                   {"\xE2\x96\x81hi", "\xE2\x96\x81you"}),
      (Strs{"hi", " you"}));
  EXPECT_EQ(decode_chain({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}, {"  a ", "b"}),
            (Strs{" a ", "b"}));
  EXPECT_EQ(
      decode_chain(
          {{"type", "Sequence"},
           {"decoders",
            {{{"type", "Replace"}, {"pattern", {{"String", "_"}}}, {"content", " "}}, {{"type", "Fuse"}}}}},
          {"_a", "_b"}),
      (Strs{" a b"}));
}

TEST(HfPostProcessor, TemplateAndTheTransformersOverride) {
  json j = tiny(json::array({"a b"}), {{"<s>", 20}, {"</s>", 21}});
  j["post_processor"] = {{"type", "Sequence"},
                         {"processors",
                          {{{"type", "ByteLevel"}},
                           {{"type", "TemplateProcessing"},
                            {"single",
                             {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                              {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}}},
                            {"special_tokens",
                             {{"<s>", {{"id", "<s>"}, {"ids", {20}}, {"tokens", {"<s>"}}}},
                              {"</s>", {{"id", "</s>"}, {"ids", {21}}, {"tokens", {"</s>"}}}}}}}}}};
  EXPECT_EQ(encode(j, "ab"), (Ids{20, 3, 21}));
  EXPECT_EQ(encode(j, ""), (Ids{20, 21}));
  // transformers' Llama/Gemma fast tokenizers: add_bos_token / add_eos_token decide.
  const json config = {{"tokenizer_class", "LlamaTokenizerFast"},
                       {"bos_token", "<s>"},
                       {"eos_token", "</s>"},
                       {"add_bos_token", false},
                       {"add_eos_token", true}};
  EXPECT_EQ(encode(j, "ab", config), (Ids{3, 21}));
  TempDir dir;
  const HuggingFaceTokenizer tok(write_tokenizer(dir, j, config));
  EXPECT_EQ(tok.eod(), 21);
  EXPECT_EQ(tok.bos(), 20);
}

TEST(HfTokenizerBadInput, MissingFilesAndUnbuiltStagesAreRefusedByName) {
  TempDir dir;
  EXPECT_TRUE(
      has(error_of([&] { HuggingFaceTokenizer t(dir.file("nowhere")); }), "tokenizer.json not found"));
  EXPECT_TRUE(has(error_of([&] { HuggingFaceTokenizer t(""); }), "needs --tokenizer-model"));
  TokenizerOptions o;
  o.type = "HuggingFaceTokenizer";
  EXPECT_TRUE(has(error_of([&] { make_tokenizer(o); }), "--tokenizer-model"));
  std::filesystem::create_directories(dir.file("bad"));
  write_file(dir.file("bad/tokenizer.json"), "{not json");
  EXPECT_TRUE(has(error_of([&] { HuggingFaceTokenizer t(dir.file("bad")); }), "is not valid JSON"));

  auto refused = [&](const std::function<void(json&)>& edit) {
    json j = tiny(json::array({"a b"}));
    edit(j);
    return error_of([&] { HuggingFaceTokenizer t(write_tokenizer(dir, j)); });
  };
  std::string e = refused([](json& j) { j["model"]["type"] = "WordPiece"; });
  EXPECT_TRUE(has(e, "model type \"WordPiece\"") && has(e, "hf_bpe.cc")) << e;
  e = refused([](json& j) { j["model"]["type"] = "Unigram"; });
  EXPECT_TRUE(has(e, "\"Unigram\"")) << e;
  e = refused([](json& j) { j["model"]["dropout"] = 0.1; });
  EXPECT_TRUE(has(e, "dropout")) << e;
  e = refused([](json& j) { j["normalizer"] = {{"type", "BertNormalizer"}}; });
  EXPECT_TRUE(has(e, "normalizer type \"BertNormalizer\"") && has(e, "hf_normalizers.cc")) << e;
  e = refused([](json& j) { j["pre_tokenizer"] = {{"type", "CharDelimiterSplit"}, {"delimiter", "x"}}; });
  EXPECT_TRUE(has(e, "pre_tokenizer type \"CharDelimiterSplit\"") && has(e, "hf_pretokenizers.cc")) << e;
  e = refused([](json& j) { j["decoder"] = {{"type", "WordPiece"}}; });
  EXPECT_TRUE(has(e, "decoder type \"WordPiece\"") && has(e, "hf_decoders.cc")) << e;
  e = refused([](json& j) { j["post_processor"] = {{"type", "RobertaProcessing"}}; });
  EXPECT_TRUE(has(e, "post_processor type \"RobertaProcessing\"")) << e;
  e = refused([](json& j) {
    j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  });
  EXPECT_TRUE(has(e, "(unclosed") && has(e, "does not compile")) << e;
  e = refused([](json& j) { j["model"]["merges"] = {"a zz"}; });
  EXPECT_TRUE(has(e, "\"zz\", which is not in the vocabulary")) << e;

  const HuggingFaceTokenizer tok(write_tokenizer(dir, tiny(json::array({"a b"}))));
  EXPECT_TRUE(has(error_of([&] { tok.tokenize("a\xFF"); }), "invalid UTF-8 at byte offset 1"));
  EXPECT_TRUE(has(error_of([&] { tok.detokenize(Ids{0, 99}); }), "token id 99 at position 1"));
}

}  // namespace hf_tokenizer_test
}  // namespace mt
