// Helpers of the `megatron convert` tests: the command, random Hugging Face
// folders (tests/reference/hf_models.py), their tensors read back byte for
// byte, and edits that spoil a folder.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

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

}  // namespace mt::test
