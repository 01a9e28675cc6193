// `megatron convert` for Qwen2ForCausalLM and Qwen3ForCausalLM, judged by the
// independent PyTorch implementation of tests/reference/hf_models.py:
//  - a random Qwen2 (q/k/v biases, tied output) and Qwen3 (q/k norms, a
//    head_dim apart from hidden / heads, untied) folder with Qwen3's real
//    tokenizer.json, imported at TP2 and at TP2 x PP2, decodes greedily to
//    the judge's log-probabilities (1e-4);
//  - exported back, the folder holds the original's tensors byte for byte,
//    its config keys and its tokenizer files;
//  - a model trained here with Qwen3's or Qwen2's options exports as that
//    family and scores, under the judge, as generate reports;
//  - what this decoder does not compute (rope_scaling, sliding_attention
//    layer_types without use_sliding_window, Qwen3's attention_bias) is
//    refused naming config.json and the key, with nothing written (a window on
//    some layers only: mistral_convert_test.cc).
#include <filesystem>
#include <nlohmann/json.hpp>

#include "convert_test_util.h"

namespace mt::test {
namespace qwen_convert_test {

namespace fs = std::filesystem;

// Import at TP2 and TP2 x PP2, judged; export of the latter, compared.
void round_trip(const std::string& family, const std::string& sizes,
                const nlohmann::json& expect_model) {
  TempDir dir;
  const std::string hf = dir.file("hf");
  make_qwen_folder(family, hf, 11, sizes);
  if (testing::Test::HasFatalFailure()) return;
  for (const auto& [tag, pp] : {std::pair<const char*, int>{"tp2", 1}, {"tp2pp2", 2}}) {
    const std::string ckpt = dir.file(std::string("ckpt_") + tag);
    const RunResult c = run(convert(" --loader hf --saver megatron --load-dir " + hf +
                                    " --save-dir " + ckpt + " --target-tensor-parallel-size 2"
                                    " --target-pipeline-parallel-size " + std::to_string(pp)));
    ASSERT_EQ(c.exit_code, 0) << family << " " << tag << "\n" << c.output;
    EXPECT_NE(c.output.find("convert: " + family + " "), std::string::npos) << c.output;
    const nlohmann::json meta = nlohmann::json::parse(read_text(ckpt + "/release/meta.json"));
    const nlohmann::json& model = meta.at("args").at("model");
    for (const auto& [key, value] : expect_model.items())
      EXPECT_EQ(model.at(key), value) << family << ": " << key;
    EXPECT_EQ(meta.at("args").at("tokenizer").at("type"), "HuggingFaceTokenizer");
    expect_judge_agrees(megatron(), "", ckpt, hf, dir, family + "_" + tag);
  }
  // (Qwen2's folder has no head_dim, and attention_bias only as Qwen3's.)
  expect_exports_back(dir.file("ckpt_tp2pp2"), hf, dir.file("back"),
                      {llama_config_keys_and({"use_sliding_window"}),
                       {"head_dim", "attention_bias"},
                       {"tokenizer.json", "tokenizer_config.json"}});
}

TEST(QwenConvert, Qwen2WithQkvBiasTiedImportsAtTp2AndTp2Pp2AndExportsBack) {
  MT_REQUIRE_QWEN_TOKENIZER();
  require_torch();
  round_trip("qwen2", " --hidden 64 --layers 4 --heads 4 --kv-heads 2 --ffn 96 --tie true",
             {{"add_qkv_bias", true}, {"qk_layernorm", false}, {"disable_bias_linear", true},
              {"untie_embeddings_and_output_weights", false}});
}

TEST(QwenConvert, Qwen3WithQkNormsAndHeadDimImportsAtTp2AndTp2Pp2AndExportsBack) {
  MT_REQUIRE_QWEN_TOKENIZER();
  require_torch();
  round_trip("qwen3",
             " --hidden 64 --layers 4 --heads 4 --kv-heads 2 --head-dim 32 --ffn 96 --tie false",
             {{"add_qkv_bias", false}, {"qk_layernorm", true}, {"kv_channels", 32},
              {"untie_embeddings_and_output_weights", true}});
}

// The judge itself tells the options apart: the weights generate decoded with,
// scored after the q/k/v biases are zeroed (qwen2) or the q/k norms set to 1
// (qwen3), disagree beyond 1e-4, so the golden tests above can fail.
TEST(QwenConvert, TheJudgeSeesTheBiasesAndTheNorms) {
  MT_REQUIRE_QWEN_TOKENIZER();
  require_torch();
  for (const auto& [family, edit] :
       {std::pair<std::string, std::string>{
            "qwen2", "t = {k: (torch.zeros_like(v) if k.endswith('.bias') else v) for k, v in t.items()}"},
        {"qwen3", "t = {k: (torch.ones_like(v) if '_norm.' in k else v) for k, v in t.items()}"}}) {
    TempDir dir;
    const std::string hf = dir.file("hf");
    make_qwen_folder(family, hf, 12, " --hidden 64 --layers 2 --heads 4 --kv-heads 2 --ffn 96");
    if (HasFatalFailure()) return;
    ASSERT_EQ(run(convert(" --loader hf --saver megatron --load-dir " + hf + " --save-dir " +
                          dir.file("ckpt"))).exit_code, 0);
    const std::string json = dir.file("gen.json");
    ASSERT_EQ(run(megatron() + " generate --load " + dir.file("ckpt") +
                  " --prompt 'The cat sees' --max-new-tokens 6 --temperature 0 --output-json " +
                  json).exit_code, 0);
    edit_tensors(hf, edit);
    if (HasFatalFailure()) return;
    const RunResult s = run(kHfModels + " score --hf-dir " + hf + " --json " + json + " --tol 1e-4");
    EXPECT_EQ(s.exit_code, 1) << family << "\n" << s.output;
  }
}

// A model trained here at TP2 x PP2 with Qwen3's options (--qk-layernorm,
// --kv-channels apart from hidden / heads, untied) or Qwen2's (--add-qkv-bias,
// tied) exports as that family, and the judge scores the exported folder as
// generate reports from the checkpoint (its norms and biases trained for six
// iterations, away from their initial ones and zeros).
TEST(QwenConvert, TrainedWithQwenOptionsExportsAFolderTheJudgeScoresAsGenerateReports) {
  require_torch();
  const std::string llama = " --normalization RMSNorm --position-embedding-type rope --swiglu"
                            " --ffn-hidden-size 48 --group-query-attention --num-query-groups 2"
                            " --disable-bias-linear";
  for (const auto& [family, options] :
       {std::pair<std::string, std::string>{"qwen3", " --qk-layernorm --kv-channels 16"
                                                     " --untie-embeddings-and-output-weights"},
        {"qwen2", " --add-qkv-bias"}}) {
    TempDir dir;
    const std::string data = tokenized_corpus("llama", dir);
    ASSERT_FALSE(data.empty());
    const std::string ckpt = dir.file("ckpt"), hf = dir.file("hf");
    const RunResult t = run(mpirun(4) + " train" + data + tiny_model_flags() + " --num-layers 4 --micro-batch-size 2" +
                            llama + options +
                            " --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2"
                            " --train-iters 6 --eval-interval 0 --save " + ckpt);
    ASSERT_EQ(t.exit_code, 0) << family << "\n" << t.output;
    const RunResult c = run(convert(" --loader megatron --saver hf --load-dir " + ckpt +
                                    " --save-dir " + hf));
    ASSERT_EQ(c.exit_code, 0) << family << "\n" << c.output;
    const nlohmann::json cfg = nlohmann::json::parse(read_text(hf + "/config.json"));
    EXPECT_EQ(cfg.at("model_type"), family);
    EXPECT_EQ(cfg.at("tie_word_embeddings"), family == "qwen2");
    if (family == "qwen3") {
      EXPECT_EQ(cfg.at("head_dim"), 16);
    }
    expect_judge_agrees(megatron(), "", ckpt, hf, dir, family + "_trained_exported");
  }
}

TEST(QwenConvert, SlidingLayerTypesRopeScalingAndQwen3AttentionBiasAreRefusedByKey) {
  require_torch();
  for (const char* family : {"qwen2", "qwen3", "qwen3_moe"}) {
    EXPECT_NE(refused_import(family, "rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}})
                  .find("yarn"),
              std::string::npos);
    refused_import(family, "layer_types", {"full_attention", "sliding_attention"});
  }
  refused_import("qwen3", "attention_bias", true);
  refused_import("qwen3_moe", "attention_bias", true);
}

}  // namespace qwen_convert_test
}  // namespace mt::test
