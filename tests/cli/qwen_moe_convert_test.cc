// `megatron convert` for Qwen3MoeForCausalLM, judged by the independent
// PyTorch implementation of tests/reference/hf_models.py (written from
// Hugging Face's modeling_qwen3_moe: Qwen3's attention, a
// Qwen3MoeSparseMoeBlock or a dense MLP per layer, softmax over all experts in
// fp32, top-k, renormalised only with norm_topk_prob):
//  - a random Qwen3-MoE folder (head_dim 32 apart from hidden / heads = 16,
//    4 experts top 2, layer 0 dense through mlp_only_layers) with Qwen3's
//    tokenizer.json imports at TP2 (two TP ranks), TP2 x PP2 (re-sharded to
//    one rank) and EP2 (two ranks, two experts each) and decodes and scores to
//    the judge's log-probabilities (1e-4); exported back from TP2 x PP2 and
//    from EP2 (the expert directories) the folder holds the original tensors
//    byte for byte and its config keys;
//  - norm_topk_prob false is Megatron's --moe-router-pre-softmax, both ways;
//  - a model trained here with experts and --qk-layernorm exports as
//    qwen3_moe and the judge scores the folder as generate reports;
//  - what this decoder does not compute or what is no layer pattern
//    (mlp_only_layers naming every layer, or no layer) is refused by file and
//    key.
#include <nlohmann/json.hpp>

#include "convert_test_util.h"

namespace mt::test {
namespace qwen_moe_convert_test {

const char* const kQwenMoeSizes =
    " --hidden 64 --layers 4 --heads 4 --kv-heads 2 --head-dim 32 --ffn 96 --moe-ffn 32"
    " --experts 4 --topk 2 --mlp-only-layers 0 --tie false";

// config.json keys an export must give back as imported (and, with
// `tokenizer`, the tokenizer's files).
SameAsImported qwen_moe_same(bool tokenizer) {
  SameAsImported same;
  same.keys = llama_config_keys_and(
      {"head_dim", "attention_bias", "use_sliding_window", "num_experts", "num_experts_per_tok",
       "moe_intermediate_size", "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers",
       "router_aux_loss_coef", "output_router_logits"});
  if (tokenizer) same.files = {"tokenizer.json", "tokenizer_config.json"};
  return same;
}

TEST(QwenMoeConvert, ImportedAtTp2Tp2Pp2AndEp2DecodesToTheJudgesLogProbsAndExportsBack) {
  MT_REQUIRE_QWEN_TOKENIZER();
  require_torch();
  TempDir dir;
  const std::string hf = dir.file("hf");
  make_qwen_folder("qwen3_moe", hf, 11, kQwenMoeSizes);
  if (HasFatalFailure()) return;
  struct Layout {
    const char* tag;
    int tp, pp, ep;
    bool two_ranks;  // decoded on the layout's two ranks, else re-sharded to one
  };
  for (const Layout& l : {Layout{"tp2", 2, 1, 1, true}, Layout{"tp2pp2", 2, 2, 1, false},
                          Layout{"ep2", 1, 1, 2, true}}) {
    const std::string ckpt = dir.file(l.tag);
    const RunResult c =
        run(convert(" --loader hf --saver megatron --load-dir " + hf + " --save-dir " + ckpt +
                    " --target-tensor-parallel-size " + std::to_string(l.tp) +
                    " --target-pipeline-parallel-size " + std::to_string(l.pp) +
                    " --target-expert-parallel-size " + std::to_string(l.ep)));
    ASSERT_EQ(c.exit_code, 0) << l.tag << "\n" << c.output;
    EXPECT_NE(c.output.find("convert: qwen3_moe "), std::string::npos) << c.output;
    EXPECT_NE(c.output.find("the MLPs of --moe-layer-freq [0,1,1,1] (0: dense) a mixture of 4 "
                            "experts (ffn 32, top 2"),
              std::string::npos)
        << c.output;
    const nlohmann::json meta = nlohmann::json::parse(read_text(ckpt + "/release/meta.json"));
    const nlohmann::json& m = meta.at("args").at("model");
    const nlohmann::json want = {{"num_experts", 4},
                                 {"moe_router_topk", 2},
                                 {"moe_ffn_hidden_size", 32},
                                 {"ffn_hidden_size", 96},
                                 {"moe_layer_freq", "[0,1,1,1]"},
                                 {"moe_router_pre_softmax", false},
                                 {"qk_layernorm", true},
                                 {"kv_channels", 32},
                                 {"add_qkv_bias", false},
                                 {"untie_embeddings_and_output_weights", true}};
    for (const auto& [key, value] : want.items()) EXPECT_EQ(m.at(key), value) << key;
    EXPECT_NEAR(m.at("moe_aux_loss_coeff").get<double>(), 0.001, 1e-9);
    EXPECT_EQ(meta.at("args").at("converted_from").at("model_type"), "qwen3_moe");
    const std::string flags = !l.two_ranks ? ""
                              : l.tp == 2  ? " --tensor-model-parallel-size 2"
                                           : " --expert-model-parallel-size 2";
    expect_judge_agrees(l.two_ranks ? mpirun(2) : megatron(), flags, ckpt, hf, dir,
                        std::string("qwen3_moe_") + l.tag);
    if (HasFatalFailure()) return;
  }
  for (const char* from : {"tp2pp2", "ep2"})
    expect_exports_back(dir.file(from), hf, dir.file(std::string("back_") + from),
                        qwen_moe_same(true));
}

// norm_topk_prob false (Qwen3MoeConfig's default): the top-k probabilities
// of the softmax over all experts, not renormalised = --moe-router-pre-softmax.
// Every layer MoE: --moe-layer-freq 1. The judge's own self-check shows the
// renormalisation moves the log-probabilities by more than 1e-3.
TEST(QwenMoeConvert, NormTopkProbFalseIsThePreSoftmaxRouterBothWays) {
  MT_REQUIRE_QWEN_TOKENIZER();
  require_torch();
  TempDir dir;
  const std::string hf = dir.file("hf"), ckpt = dir.file("ckpt"), back = dir.file("back");
  make_qwen_folder("qwen3_moe", hf, 12,
                   " --hidden 64 --layers 2 --heads 4 --kv-heads 2 --moe-ffn 32 --experts 4"
                   " --topk 2 --norm-topk-prob false --tie true");
  if (HasFatalFailure()) return;
  const RunResult c = run(convert(" --loader hf --saver megatron --load-dir " + hf +
                                  " --save-dir " + ckpt + " --target-tensor-parallel-size 2"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  const nlohmann::json meta = nlohmann::json::parse(read_text(ckpt + "/release/meta.json"));
  EXPECT_EQ(meta.at("args").at("model").at("moe_router_pre_softmax"), true);
  EXPECT_EQ(meta.at("args").at("model").at("moe_layer_freq"), "1");
  expect_judge_agrees(megatron(), "", ckpt, hf, dir, "qwen3_moe_pre_softmax");
  if (HasFatalFailure()) return;
  expect_exports_back(ckpt, hf, back, qwen_moe_same(false));
}

// A model trained here at EP2 with experts on layer 1 only, --qk-layernorm,
// --kv-channels apart from hidden / heads and the pre-softmax router exports
// as qwen3_moe (mlp_only_layers [0], norm_topk_prob false), and the judge
// scores the folder as generate reports from the checkpoint.
TEST(QwenMoeConvert, TrainedWithExpertsAndQkNormsExportsAFolderTheJudgeScoresAsGenerateReports) {
  require_torch();
  TempDir dir;
  const std::string data = tokenized_corpus("llama", dir);
  ASSERT_FALSE(data.empty());
  const std::string ckpt = dir.file("ckpt"), hf = dir.file("hf");
  const RunResult t = run(mpirun(2) + " train" + data + tiny_model_flags() +
                          " --normalization RMSNorm --position-embedding-type rope --swiglu "
                          "--ffn-hidden-size 48"
                          " --group-query-attention --num-query-groups 2 --disable-bias-linear"
                          " --qk-layernorm --kv-channels 16 --untie-embeddings-and-output-weights"
                          " --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 24 "
                          "--moe-layer-freq '[0,1]'"
                          " --moe-router-pre-softmax --moe-aux-loss-coeff 0.01 "
                          "--expert-model-parallel-size 2"
                          " --train-iters 6 --eval-interval 0 --save " +
                          ckpt);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const RunResult c =
      run(convert(" --loader megatron --saver hf --load-dir " + ckpt + " --save-dir " + hf));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  const nlohmann::json cfg = nlohmann::json::parse(read_text(hf + "/config.json"));
  EXPECT_EQ(cfg.at("model_type"), "qwen3_moe");
  EXPECT_EQ(cfg.at("architectures"), nlohmann::json({"Qwen3MoeForCausalLM"}));
  EXPECT_EQ(cfg.at("mlp_only_layers"), nlohmann::json({0}));
  EXPECT_EQ(cfg.at("norm_topk_prob"), false);
  EXPECT_EQ(cfg.at("intermediate_size"), 48);
  EXPECT_EQ(cfg.at("moe_intermediate_size"), 24);
  EXPECT_EQ(cfg.at("head_dim"), 16);
  expect_judge_agrees(megatron(), "", ckpt, hf, dir, "qwen3_moe_trained_exported");
}

// A layer pattern that is none (every layer dense, or an index past the
// layers) and more experts per token than experts are refused by key.
TEST(QwenMoeConvert, LayerPatternsAndExpertCountsThatAreNoModelAreRefusedByKey) {
  require_torch();
  EXPECT_NE(refused_import("qwen3_moe", "mlp_only_layers", nlohmann::json::array({0, 1}),
                           "'decoder_sparse_step' 1 and "
                           "'mlp_only_layers' [0,1] leave no layer of 2 a mixture of experts")
                .find("model_type qwen3"),
            std::string::npos);
  refused_import("qwen3_moe", "mlp_only_layers", nlohmann::json::array({5}),
                 "'mlp_only_layers' holds 5, not a layer index in [0, 2)");
  refused_import("qwen3_moe", "decoder_sparse_step", 3,
                 "'decoder_sparse_step' 3 and 'mlp_only_layers' [] leave no layer");
  refused_import("qwen3_moe", "num_experts_per_tok", 5,
                 "'num_experts_per_tok' 5 is above 'num_experts' 4");
}

}  // namespace qwen_moe_convert_test
}  // namespace mt::test
