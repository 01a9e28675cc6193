// SentencePiece tokenizers: a model trained in the test with Debian's
// spm_train; our ids equal spm_encode's (the library's own command-line
// encoder) plus Megatron-LM's rules for SentencePieceTokenizer (special tokens
// appended to the vocabulary, <EOD> as eod) and Llama2Tokenizer ([bos] + ids,
// eod = eos). Fails with a message when spm_train is not installed.
#include "data/sentencepiece_tokenizer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "data/utf8.h"
#include "data_test_util.h"

namespace mt {
namespace sentencepiece_tokenizer_test {

using test::read_file;
using test::TempDir;
using test::write_file;

// The lines the model is trained on and the test encodes: English, accents,
// CJK, emoji, digits. Byte fallback covers characters the model lacks.
std::vector<std::string> corpus_lines() {
  std::vector<std::string> lines;
  const char* base[] = {
      "The quick brown fox jumps over the lazy dog.",
      "Caf\xC3\xA9 cr\xC3\xA8me br\xC3\xBBl\xC3\xA9" "e, na\xC3\xAFve r\xC3\xA9sum\xC3\xA9.",
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88",
      "Numbers 12345 and 3.14159, dates 2024-01-01.",
      "don't stop, we'll see, it's fine",
      "Emoji \xF0\x9F\x98\x80 and \xF0\x9F\x8E\x89 everywhere",
  };
  for (int rep = 0; rep < 40; ++rep)
    for (const char* b : base) lines.push_back(std::string(b) + " " + std::to_string(rep * 7 % 13));
  return lines;
}

class SentencePieceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::system("spm_train --help > /dev/null 2>&1") != 0) return;
    dir_ = new TempDir();
    std::string text;
    for (const std::string& l : corpus_lines()) text += l + "\n";
    write_file(dir_->file("corpus.txt"), text);
    const std::string cmd = "spm_train --input=" + dir_->file("corpus.txt") + " --model_prefix=" +
                            dir_->file("m") +
                            " --vocab_size=400 --model_type=bpe --character_coverage=0.9995"
                            " --byte_fallback=true --minloglevel=2 > " + dir_->file("train.log") + " 2>&1";
    trained_ = std::system(cmd.c_str()) == 0;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(dir_, nullptr) << "spm_train not found; scripts/install_deps.sh installs the "
                                "Debian package sentencepiece";
    ASSERT_TRUE(trained_) << "spm_train failed: " << read_file(dir_->file("train.log"));
  }
  static std::string model() { return dir_->file("m.model"); }

  // spm_encode --output_format=id over `lines`, one id list per line.
  static std::vector<std::vector<int32_t>> spm_encode(const std::vector<std::string>& lines) {
    std::string text;
    for (const std::string& l : lines) text += l + "\n";
    write_file(dir_->file("enc_in.txt"), text);
    const std::string cmd = "spm_encode --model=" + model() + " --output_format=id < " +
                            dir_->file("enc_in.txt") + " > " + dir_->file("enc_out.txt");
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::vector<std::vector<int32_t>> out;
    std::istringstream in(read_file(dir_->file("enc_out.txt")));
    std::string line;
    while (std::getline(in, line)) {
      out.emplace_back();
      std::istringstream ls(line);
      for (int32_t v; ls >> v;) out.back().push_back(v);
    }
    return out;
  }

  static TempDir* dir_;
  static bool trained_;
};
TempDir* SentencePieceTest::dir_ = nullptr;
bool SentencePieceTest::trained_ = false;

std::vector<std::string> test_lines() {
  std::vector<std::string> lines = corpus_lines();
  lines.resize(12);
  lines.push_back("Unseen: \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xE2\x9D\xA4 \xF0\x9F\x90\x8D zzz");
  lines.push_back("  spaces   inside  ");
  return lines;
}

TEST_F(SentencePieceTest, Llama2IsBosPlusSpmEncode) {
  SentencePieceTokenizer tok(model(), SentencePieceTokenizer::Flavor::kLlama2);
  EXPECT_EQ(tok.type(), "Llama2Tokenizer");
  EXPECT_EQ(tok.vocab_size(), 400);
  EXPECT_EQ(tok.bos(), 1);  // spm_train's defaults: unk 0, bos 1, eos 2, no pad
  EXPECT_EQ(tok.eos(), 2);
  EXPECT_EQ(tok.eod(), 2);
  const std::vector<std::string> lines = test_lines();
  const auto ref = spm_encode(lines);
  ASSERT_EQ(ref.size(), lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    std::vector<int32_t> want = {1};
    want.insert(want.end(), ref[i].begin(), ref[i].end());
    EXPECT_EQ(tok.tokenize(lines[i]), want) << lines[i];
    // Decoding drops bos and gives the text back (the model is lossless with
    // byte fallback; SentencePiece strips the leading/trailing space runs it
    // normalises, so compare against its own round trip for the last line).
    if (i + 1 < lines.size()) {
      EXPECT_EQ(tok.detokenize(want), lines[i]);
    }
  }
  EXPECT_EQ(tok.tokenize(""), (std::vector<int32_t>{1}));  // an empty text is [bos]
  const nlohmann::json d = tok.describe();
  EXPECT_EQ(d["tokenizer_model"]["sha256"].get<std::string>().size(), 64u);
}

TEST_F(SentencePieceTest, SentencePieceTokenizerAddsMegatronSpecialTokens) {
  SentencePieceTokenizer tok(model(), SentencePieceTokenizer::Flavor::kSentencePiece);
  // <CLS> 400, <SEP> 401, <EOD> 402, <MASK> 403, <PAD> 404; <s>, </s> exist.
  EXPECT_EQ(tok.vocab_size(), 405);
  EXPECT_EQ(tok.eod(), 402);
  EXPECT_EQ(tok.bos(), 1);
  EXPECT_EQ(tok.eos(), 2);
  const auto& sp = tok.special_tokens();
  ASSERT_EQ(sp.size(), 7u);
  EXPECT_EQ(sp[4].first, "<PAD>");
  EXPECT_EQ(sp[5], (std::pair<std::string, int32_t>{"<s>", 1}));
  const std::vector<std::string> lines = test_lines();
  const auto ref = spm_encode(lines);
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(tok.tokenize(lines[i]), ref[i]) << lines[i];
  // Special tokens in the text are cut out; pieces between are encoded alone.
  const auto parts = spm_encode({"The fox", "dog</s>"});  // "</s>" is not special to spm_encode
  std::vector<int32_t> want = parts[0];
  want.push_back(402);
  std::vector<int32_t> tail;
  tok.encode_plain("dog", tail);
  want.insert(want.end(), tail.begin(), tail.end());
  want.push_back(2);
  EXPECT_EQ(tok.tokenize("The fox<EOD>dog</s>"), want);
  EXPECT_EQ(tok.detokenize(want), "The fox <EOD> dog </s> ");
}

TEST_F(SentencePieceTest, StreamingAndErrors) {
  SentencePieceTokenizer tok(model(), SentencePieceTokenizer::Flavor::kLlama2);
  for (const std::string& line : test_lines()) {
    const std::vector<int32_t> ids = tok.tokenize(line);
    StreamingDetokenizer stream(tok);
    std::string out;
    for (int32_t id : ids) {
      const std::string part = stream.push(id);
      EXPECT_EQ(utf8_first_invalid(part), part.size());
      out += part;
    }
    out += stream.finish();
    EXPECT_EQ(out, tok.detokenize(ids)) << line;
  }
  std::string msg = test::error_of([&] { tok.detokenize(std::vector<int32_t>{5, 999}); });
  EXPECT_NE(msg.find("999"), std::string::npos) << msg;
  msg = test::error_of([&] { tok.tokenize("ok\xFF"); });
  EXPECT_NE(msg.find("byte offset 2"), std::string::npos) << msg;
  msg = test::error_of([&] {
    SentencePieceTokenizer("/nonexistent/t.model", SentencePieceTokenizer::Flavor::kLlama2);
  });
  EXPECT_NE(msg.find("/nonexistent/t.model"), std::string::npos) << msg;
}

}  // namespace sentencepiece_tokenizer_test
}  // namespace mt
