// `megatron convert` for Llama 3.x (LlamaForCausalLM with rope_scaling
// llama3, tied embeddings as Llama 3.2 1B/3B and SmolLM2), judged by the
// independent PyTorch implementation of tests/reference/hf_models.py
// (modeling_rope_utils' _compute_llama3_parameters):
//  - a random tiny Llama 3.1-style folder (rope_scaling with
//    original_max_position_embeddings 32, so that the head's frequencies fall
//    in all three regimes and the scaling moves the log-probabilities at the
//    decoded positions; tied) imported at TP2 and TP2 x PP2 decodes greedily
//    to the judge's log-probabilities (1e-4), and stores the four values;
//  - exported back, the folder holds the original's tensors byte for byte and
//    its config keys, rope_scaling included;
//  - the judge tells the scaling apart (scored without it, it disagrees);
//  - "type" for "rope_type" imports alike; another rope_scaling type
//    (linear, dynamic, yarn, longrope), a llama3 object without one of its
//    values, attention_bias or mlp_bias true are refused naming config.json
//    and the key, with nothing written.
#include <nlohmann/json.hpp>

#include "convert_test_util.h"

namespace mt::test {
namespace llama3_convert_test {

const nlohmann::json kLlama3Scaling = {{"factor", 8.0},
                                       {"low_freq_factor", 1.0},
                                       {"high_freq_factor", 4.0},
                                       {"original_max_position_embeddings", 32},
                                       {"rope_type", "llama3"}};

// A random Llama 3.1-style folder (head dim 16: wavelengths 6.3 kept, 19.9
// interpolated, 63 and up / 8), tied, with the SentencePiece tokenizer.
// Matrices 0.2 N: at the judge's default 0.02 attention is nearly uniform and
// dropping the scaling moves the log-probabilities by only ~1.5e-4 (measured),
// at 0.2 by ~3 while generate still agrees with the judge to ~1e-6.
void make_llama3_folder(const TempDir& dir, const std::string& hf, int seed, int layers) {
  int vocab = 0;
  add_hf_tokenizer_files("llama", dir, hf, &vocab);
  if (testing::Test::HasFatalFailure()) return;
  const RunResult r = run(kHfModels + " random --family llama --out " + hf + " --seed " +
                          std::to_string(seed) + " --vocab-size " + std::to_string(vocab) +
                          " --hidden 64 --layers " + std::to_string(layers) +
                          " --heads 4 --kv-heads 2 --ffn 96 --tie true --rope-scaling 8,1,4,32"
                          " --matrix-std 0.2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

// generate --output-json from `ckpt` into `json`.
void generate_json(const std::string& ckpt, const std::string& json, int tokens = 12) {
  const RunResult g = run(megatron() + " generate --load " + ckpt +
                          " --prompt 'The cat sees' --max-new-tokens " + std::to_string(tokens) +
                          " --temperature 0 --output-json " + json);
  ASSERT_EQ(g.exit_code, 0) << g.output;
}

RunResult score(const std::string& hf, const std::string& json) {
  return run(kHfModels + " score --hf-dir " + hf + " --json " + json + " --tol 1e-4");
}

std::string import(const std::string& hf, const std::string& ckpt, int tp, int pp) {
  const RunResult c = run(convert(" --loader hf --saver megatron --load-dir " + hf +
                                  " --save-dir " + ckpt + " --target-tensor-parallel-size " +
                                  std::to_string(tp) + " --target-pipeline-parallel-size " +
                                  std::to_string(pp)));
  EXPECT_EQ(c.exit_code, 0) << c.output;
  return c.output;
}

TEST(Llama3Convert, RopeScalingTiedImportsAtTp2AndTp2Pp2AndExportsBack) {
  require_torch();
  TempDir dir;
  const std::string hf = dir.file("hf");
  make_llama3_folder(dir, hf, 21, 4);
  if (HasFatalFailure()) return;
  for (const auto& [tag, pp] : {std::pair<const char*, int>{"tp2", 1}, {"tp2pp2", 2}}) {
    const std::string ckpt = dir.file(std::string("ckpt_") + tag);
    import(hf, ckpt, 2, pp);
    const nlohmann::json model =
        nlohmann::json::parse(read_text(ckpt + "/release/meta.json")).at("args").at("model");
    EXPECT_EQ(model.at("use_rope_scaling"), true) << tag;
    EXPECT_EQ(model.at("rope_scaling_factor"), 8.0) << tag;
    EXPECT_EQ(model.at("rope_scaling_low_freq_factor"), 1.0) << tag;
    EXPECT_EQ(model.at("rope_scaling_high_freq_factor"), 4.0) << tag;
    EXPECT_EQ(model.at("rope_scaling_original_max_position_embeddings"), 32) << tag;
    EXPECT_EQ(model.at("untie_embeddings_and_output_weights"), false) << tag;
    expect_judge_agrees_on_generate(megatron(), "", ckpt, hf, dir, std::string("llama3_") + tag);
    if (HasFatalFailure()) return;
  }
  const std::string back = dir.file("back");
  expect_exports_back(dir.file("ckpt_tp2pp2"), hf, back,
                      {llama_config_keys_and({"rope_scaling", "attention_bias"}), {}, {}});
  if (HasFatalFailure()) return;
  const nlohmann::json b = nlohmann::json::parse(read_text(back + "/config.json"));
  EXPECT_EQ(b.at("rope_scaling"), kLlama3Scaling);
  EXPECT_EQ(b.at("mlp_bias"), false);
}

// The judge sees the scaling at these positions: the log-probabilities
// generate decodes with it are refused by the judge once config.json drops
// rope_scaling; and an older file's "type" reads as "rope_type".
TEST(Llama3Convert, TheJudgeSeesTheScalingAndTypeReadsAsRopeType) {
  require_torch();
  TempDir dir;
  const std::string hf = dir.file("hf");
  make_llama3_folder(dir, hf, 22, 2);
  if (HasFatalFailure()) return;
  nlohmann::json old = kLlama3Scaling;
  old.erase("rope_type");
  old["type"] = "llama3";
  edit_config(hf, "rope_scaling", old);
  import(hf, dir.file("ckpt"), 1, 1);
  const std::string json = dir.file("gen.json");
  generate_json(dir.file("ckpt"), json, 8);
  if (HasFatalFailure()) return;
  const RunResult agree = score(hf, json);
  EXPECT_EQ(agree.exit_code, 0) << agree.output;
  edit_config(hf, "rope_scaling", nullptr);
  const RunResult plain = score(hf, json);
  EXPECT_EQ(plain.exit_code, 1) << "the judge without rope_scaling must disagree\n"
                                << plain.output;
}

TEST(Llama3Convert, OtherRopeScalingTypesAndBiasesAreRefusedByKey) {
  require_torch();
  TempDir dir;
  const std::string base = dir.file("base");
  make_llama3_folder(dir, base, 23, 2);
  if (HasFatalFailure()) return;
  auto refused = [&](const std::string& tag, const char* key, const nlohmann::json& value,
                     const std::string& expect) {
    const std::string hf = dir.file("hf_" + tag), ckpt = dir.file("ckpt_" + tag);
    std::filesystem::copy(base, hf, std::filesystem::copy_options::recursive);
    edit_config(hf, key, value);
    const RunResult c = run(convert(" --loader hf --saver megatron --load-dir " + hf +
                                    " --save-dir " + ckpt));
    EXPECT_NE(c.exit_code, 0) << tag << "\n" << c.output;
    EXPECT_NE(c.output.find(hf + "/config.json"), std::string::npos) << tag << "\n" << c.output;
    EXPECT_NE(c.output.find(expect), std::string::npos) << tag << "\n" << c.output;
    EXPECT_FALSE(exists(ckpt)) << tag << ": nothing may be written";
  };
  for (const char* type : {"linear", "dynamic", "yarn", "longrope"})
    refused(type, "rope_scaling", {{"rope_type", type}, {"factor", 4.0}},
            std::string("rope_scaling = ") + "{\"factor\":4.0,\"rope_type\":\"" + type +
                "\"} is not supported: megatron.cpp computes plain RoPE or Llama 3.1's scaling "
                "(rope_type llama3); '" + type + "' is not built");
  nlohmann::json partial = kLlama3Scaling;
  partial.erase("low_freq_factor");
  refused("partial", "rope_scaling", partial, "rope_type llama3 has no 'low_freq_factor'");
  nlohmann::json small = kLlama3Scaling;
  small["factor"] = 0.5;
  refused("factor", "rope_scaling", small, "'factor' is 0.5, below 1");
  refused("attention_bias", "attention_bias", true, "attention_bias = true is not supported");
  refused("mlp_bias", "mlp_bias", true, "mlp_bias = true is not supported");
}

}  // namespace llama3_convert_test
}  // namespace mt::test
