// megatron::Converter (include/megatron/convert.h) from C++, without flag
// words: a small random GPT-2 Hugging Face folder (written here: config.json,
// model.safetensors, a byte-level vocab.json of the 256 bytes + eod and an
// empty merges.txt) imported at TP2 and exported back holds the same tensors
// byte for byte and the same tokenizer files. The words constructor parses
// `megatron convert`'s flags as the binary does (--help a FlagHelp with its
// usage, a refused flag a FlagError naming it). Each rank of an mpirun works
// in its own folder.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "megatron/convert.h"
#include "temp_dir.h"
#include "text_files.h"

namespace convert_test {

constexpr int64_t kVocab = 257, kHidden = 16, kLayers = 2, kHeads = 2, kPositions = 32;

using mt::test::read_text;
using mt::test::write_text;

// GPT-2's byte-level symbols (bytes_to_unicode): printable bytes stand for
// themselves, the others for code points 256 + n, as UTF-8.
std::string byte_symbol(int b) {
  static const std::vector<int> cps = [] {
    std::vector<int> cp(256, -1);
    int n = 0;
    for (int c = 0; c < 256; ++c)
      cp[size_t(c)] = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE)
                          ? c
                          : 256 + n++;
    return cp;
  }();
  const int c = cps[size_t(b)];
  std::string s;
  if (c < 0x80) {
    s += char(c);
  } else {
    s += char(0xC0 | (c >> 6));
    s += char(0x80 | (c & 0x3F));
  }
  return s;
}

// A random GPT2LMHeadModel folder, as Hugging Face saves one (Conv1D weights (in, out)).
void make_gpt2_folder(const std::string& hf) {
  std::filesystem::create_directories(hf);
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_symbol(b)] = b;
  vocab["<|endoftext|>"] = 256;
  write_text(hf + "/vocab.json", vocab.dump());
  write_text(hf + "/merges.txt", "#version: 0.2\n");
  const nlohmann::json config = {
      {"model_type", "gpt2"}, {"architectures", {"GPT2LMHeadModel"}}, {"vocab_size", kVocab},
      {"n_embd", kHidden}, {"n_layer", kLayers}, {"n_head", kHeads}, {"n_positions", kPositions},
      {"n_inner", nullptr}, {"layer_norm_epsilon", 1e-5}, {"activation_function", "gelu_new"},
      {"tie_word_embeddings", true}, {"torch_dtype", "float32"}};
  write_text(hf + "/config.json", config.dump(2));

  const int64_t h = kHidden, f = 4 * kHidden;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
      {"transformer.wte.weight", {kVocab, h}}, {"transformer.wpe.weight", {kPositions, h}}};
  for (int64_t i = 0; i < kLayers; ++i) {
    const std::string b = "transformer.h." + std::to_string(i) + ".";
    for (const auto& [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"ln_1.weight", {h}}, {"ln_1.bias", {h}}, {"attn.c_attn.weight", {h, 3 * h}},
             {"attn.c_attn.bias", {3 * h}}, {"attn.c_proj.weight", {h, h}},
             {"attn.c_proj.bias", {h}}, {"ln_2.weight", {h}}, {"ln_2.bias", {h}},
             {"mlp.c_fc.weight", {h, f}}, {"mlp.c_fc.bias", {f}}, {"mlp.c_proj.weight", {f, h}},
             {"mlp.c_proj.bias", {h}}})
      shapes.push_back({b + name, shape});
  }
  shapes.push_back({"transformer.ln_f.weight", {h}});
  shapes.push_back({"transformer.ln_f.bias", {h}});
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<std::vector<float>> data;
  data.reserve(shapes.size());
  mt::SafetensorsWriter w;
  for (const auto& [name, shape] : shapes) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float>& v = data.emplace_back(size_t(n));
    const bool norm =
        name.find("ln_") != std::string::npos && name.find(".weight") != std::string::npos;
    for (float& x : v) x = (norm ? 1.0f : 0.0f) + normal(rng);
    w.add(name, mt::StDType::kF32, shape, v.data());
  }
  w.set_metadata("format", "pt");
  w.write(hf + "/model.safetensors");
}

// name -> (shape, bytes) of a folder's model.safetensors.
using Tensors = std::map<std::string, std::pair<std::vector<int64_t>, std::string>>;

Tensors tensors(const std::string& dir) {
  mt::SafetensorsReader r(dir + "/model.safetensors");
  Tensors out;
  for (const std::string& n : r.names()) {
    const mt::StTensorInfo& i = r.info(n);
    EXPECT_EQ(i.dtype, mt::StDType::kF32) << n;
    out[n] = {i.shape, std::string(static_cast<const char*>(r.raw(n)), i.bytes())};
  }
  return out;
}

TEST(Convert, AGpt2FolderImportedAtTp2AndExportedBackIsBitIdentical) {
  mt::test::TempDir dir;
  const std::string hf = dir.file("hf"), ckpt = dir.file("ckpt"), back = dir.file("back");
  make_gpt2_folder(hf);

  megatron::ConvertOptions in;
  in.direction = megatron::ConvertDirection::kHfToMegatron;
  in.input = hf;
  in.output = ckpt;
  in.target_tensor_parallel_size = 2;
  ASSERT_EQ(megatron::Converter(in).run(), 0);
  EXPECT_EQ(read_text(ckpt + "/latest_checkpointed_iteration.txt"), "release\n");
  const nlohmann::json meta = nlohmann::json::parse(read_text(ckpt + "/release/meta.json"));
  EXPECT_EQ(meta.at("iteration"), 0);
  EXPECT_EQ(meta.at("release"), true);
  int shards = 0;
  for (const auto& e : std::filesystem::directory_iterator(ckpt + "/release"))
    shards += e.is_directory() && e.path().filename().string().rfind("mp_rank_", 0) == 0;
  EXPECT_EQ(shards, 2);  // TP2

  megatron::ConvertOptions out;
  out.direction = megatron::ConvertDirection::kMegatronToHf;
  out.input = ckpt;
  out.output = back;
  ASSERT_EQ(megatron::Converter(out).run(), 0);
  const auto a = tensors(hf), b = tensors(back);
  ASSERT_EQ(a.size(), size_t(2 + 12 * kLayers + 2));
  ASSERT_EQ(b.size(), a.size());
  for (const auto& [name, t] : a) {
    ASSERT_EQ(b.count(name), 1u) << name << " is not exported";
    EXPECT_EQ(b.at(name).first, t.first) << name;
    EXPECT_TRUE(b.at(name).second == t.second) << name << " differs";
  }
  const nlohmann::json c = nlohmann::json::parse(read_text(back + "/config.json"));
  EXPECT_EQ(c.at("model_type"), "gpt2");
  EXPECT_EQ(c.at("vocab_size"), kVocab);  // the padding rows (to 256 x TP2) cut off
  EXPECT_EQ(c.at("n_embd"), kHidden);
  EXPECT_EQ(c.at("n_layer"), kLayers);
  for (const char* f : {"vocab.json", "merges.txt"})
    EXPECT_EQ(read_text(back + "/" + f), read_text(hf + "/" + f)) << f;
}

TEST(Convert, OptionsWithoutFoldersAreRefusedAtOnce) {
  megatron::ConvertOptions o;
  o.input = "hf";
  EXPECT_THROW(megatron::Converter{o}, std::invalid_argument);  // no output
  o.output = "ckpt";
  o.input.clear();
  EXPECT_THROW(megatron::Converter{o}, std::invalid_argument);
  o.input = "hf";
  EXPECT_EQ(megatron::Converter(o).options().output, "ckpt");
}

TEST(ConvertFlags, TheWordsSetTheOptionsAsTheCommandsFlags) {
  const megatron::Converter exporting(
      {"--model-type", "GPT", "--loader", "megatron", "--saver", "hf", "--load-dir", "ckpt",
       "--save-dir", "hf", "--bf16", "--max-shard-size-mb", "7"});
  EXPECT_EQ(exporting.options().direction, megatron::ConvertDirection::kMegatronToHf);
  EXPECT_EQ(exporting.options().input, "ckpt");
  EXPECT_EQ(exporting.options().output, "hf");
  EXPECT_TRUE(exporting.options().bf16);
  EXPECT_EQ(exporting.options().max_shard_size_mb, 7);
  const megatron::Converter import(
      {"--model-type", "GPT", "--loader", "llama_hf", "--saver", "megatron", "--load-dir", "hf",
       "--save-dir", "ckpt", "--target-tensor-parallel-size", "4",
       "--target-expert-parallel-size", "2", "--overwrite-checkpoints"});
  EXPECT_EQ(import.options().direction, megatron::ConvertDirection::kHfToMegatron);
  EXPECT_EQ(import.options().target_tensor_parallel_size, 4);
  EXPECT_EQ(import.options().target_pipeline_parallel_size, 1);
  EXPECT_EQ(import.options().target_expert_parallel_size, 2);
  EXPECT_EQ(import.options().make_vocab_size_divisible_by, 128);
  EXPECT_TRUE(import.options().overwrite);
}

TEST(ConvertFlags, HelpIsAFlagHelpWithTheConvertUsage) {
  try {
    megatron::Converter c({"--help"});
    FAIL() << "--help did not throw";
  } catch (const megatron::FlagHelp& h) {
    const std::string usage = h.what();
    EXPECT_EQ(usage.rfind("convert Hugging Face gpt2/llama folders <-> megatron.cpp checkpoints\n"
                          "Usage: convert [OPTIONS]\n", 0), 0u) << usage;
    EXPECT_NE(usage.find("--target-tensor-parallel-size"), std::string::npos);
    EXPECT_NE(usage.find("megatron -> hf: any checkpoint"), std::string::npos);  // the footer
  }
}

TEST(ConvertFlags, RefusedFlagsAreFlagErrorsNamingThem) {
  try {
    megatron::Converter c({"--model-type", "GPT", "--loader", "hf", "--saver", "megatron",
                           "--load-dir", "a", "--save-dir", "b", "--target-tp", "2"});
    FAIL() << "--target-tp did not throw";
  } catch (const megatron::FlagHelp& h) {
    FAIL() << "a FlagHelp: " << h.what();
  } catch (const megatron::FlagError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("unknown flag --target-tp; ", 0), 0u) << what;
    EXPECT_NE(what.find("see `megatron convert --help`"), std::string::npos) << what;
  }
  try {  // argparse's int(): no octal, no hex
    megatron::Converter c({"--model-type", "GPT", "--loader", "hf", "--saver", "megatron",
                           "--load-dir", "a", "--save-dir", "b",
                           "--target-tensor-parallel-size", "0x2"});
    FAIL() << "0x2 did not throw";
  } catch (const megatron::FlagHelp& h) {
    FAIL() << "a FlagHelp: " << h.what();
  } catch (const megatron::FlagError& e) {
    EXPECT_NE(std::string(e.what()).find("--target-tensor-parallel-size"), std::string::npos)
        << e.what();
  }
}

}  // namespace convert_test
