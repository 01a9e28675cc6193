// `megatron convert` for DeepseekV3ForCausalLM and DeepseekV2ForCausalLM,
// judged by tests/reference/deepseek_reference.py (an independent float64
// PyTorch forward written from Hugging Face's modeling_deepseek_v3 / _v2:
// batch-first, separate projections, HF's YaRN and interleaved RoPE, HF's
// routers):
//  - a random DeepSeek-V3 folder (first layer dense, YaRN with mscale and
//    mscale_all_dim, q_lora_rank, 16 experts top 4 in 4 groups of which 2 are
//    kept, sigmoid scores with a nonzero e_score_correction_bias, a shared
//    expert, routed_scaling_factor 2.5) imports at TP1 and at TP2 x EP2 and
//    decodes and scores to the judge's log-probabilities (1e-4); exported back
//    from both, the folder holds the original tensors byte for byte and its
//    config keys; the judge itself tells the bias and the YaRN softmax scale apart
//    (so agreeing means something); the TP2 x EP2 import fine-tunes on 4 ranks
//    and exports what the judge scores;
//  - a DeepSeek-V2 folder (q_proj without a q latent, softmax scores,
//    group_limited_greedy, two shared experts, V2-Lite's YaRN mscales) the
//    same at TP2;
//  - a V3-shaped model trained here on 4 ranks (TP2 x EP2) exports a folder
//    the judge scores as generate reports, and that folder round-trips;
//  - a V3 folder with rope_interleave false imports with its rope rows
//    permuted and exports interleaved, the judge agreeing with both;
//  - a V3 folder with a multi-token prediction depth imports it (TP1, TP2 x
//    EP2) and trains to the judge's main and MTP losses, and exports back;
//  - what Megatron's router or MLA do not compute is refused by file and key,
//    an incomplete MTP depth by tensor, and nothing is written.
#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "convert_test_util.h"

namespace mt::test {
namespace deepseek_convert_test {

const std::string kDeepseekJudge =
    std::string("/usr/bin/python3 ") + MT_SOURCE_DIR + "/tests/reference/deepseek_reference.py";

const char* const kV3Sizes =
    " --version v3 --layers 3 --hidden 64 --heads 4 --experts 16 --topk 4 --groups 4"
    " --topk-group 2 --shared 1 --scaling 2.5 --dense-layers 1 --q-lora-rank 32"
    " --kv-lora-rank 32 --nope-dim 16 --rope-dim 8 --v-dim 16 --yarn 4,32,1.0,0.8 --max-pos 128";

// A random DeepSeek folder (the judge's `random`, `sizes`) with a 96-piece
// SentencePiece tokenizer.
void make_deepseek_folder(const TempDir& dir, const std::string& hf, int seed,
                          const std::string& sizes) {
  int vocab = 0;
  add_hf_tokenizer_files("llama", dir, hf, &vocab);
  if (testing::Test::HasFatalFailure()) return;
  const RunResult r = run(kDeepseekJudge + " random --out " + hf + " --seed " +
                          std::to_string(seed) + " --vocab-size " + std::to_string(vocab) + sizes);
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

SameAsImported deepseek_same(bool v3) {
  SameAsImported same;
  same.keys = {"model_type",          "architectures",         "vocab_size",
               "hidden_size",         "intermediate_size",     "num_hidden_layers",
               "num_attention_heads", "num_key_value_heads",   "max_position_embeddings",
               "rms_norm_eps",        "rope_theta",            "hidden_act",
               "tie_word_embeddings", "q_lora_rank",           "kv_lora_rank",
               "qk_nope_head_dim",    "qk_rope_head_dim",      "v_head_dim",
               "n_routed_experts",      "num_experts_per_tok",
               "n_shared_experts",    "moe_intermediate_size", "first_k_dense_replace",
               "routed_scaling_factor", "norm_topk_prob",      "n_group",
               "topk_group",          "attention_bias"};
  if (v3) same.keys.push_back("rope_interleave");
  else same.keys.push_back("topk_method");
  same.keys_if_any = {"rope_scaling"};
  same.files = {"tokenizer.model"};
  return same;
}

std::string import_flags(const std::string& hf, const std::string& ckpt, int tp, int ep) {
  return " --loader hf --saver megatron --load-dir " + hf + " --save-dir " + ckpt +
         " --target-tensor-parallel-size " + std::to_string(tp) +
         " --target-expert-parallel-size " + std::to_string(ep);
}

TEST(DeepseekConvert, V3ImportedAtTp1AndTp2Ep2DecodesToTheJudgesLogProbsAndExportsBack) {
  require_torch();
  TempDir dir;
  const std::string hf = dir.file("hf");
  make_deepseek_folder(dir, hf, 5, kV3Sizes);
  if (HasFatalFailure()) return;
  struct Layout {
    const char* tag;
    int tp, ep;
  };
  for (const Layout& l : {Layout{"tp1", 1, 1}, Layout{"tp2ep2", 2, 2}}) {
    const std::string ckpt = dir.file(l.tag);
    const RunResult c = run(convert(import_flags(hf, ckpt, l.tp, l.ep)));
    ASSERT_EQ(c.exit_code, 0) << l.tag << "\n" << c.output;
    EXPECT_NE(c.output.find("convert: deepseek_v3 "), std::string::npos) << c.output;
    EXPECT_NE(c.output.find("the MLPs of --moe-layer-freq [0,1,1] (0: dense) a mixture of 16 "
                            "experts (ffn 16, top 4"),
              std::string::npos)
        << c.output;
    const nlohmann::json meta = nlohmann::json::parse(read_text(ckpt + "/release/meta.json"));
    const nlohmann::json& m = meta.at("args").at("model");
    const nlohmann::json want = {{"multi_latent_attention", true},
                                 {"q_lora_rank", 32},
                                 {"kv_lora_rank", 32},
                                 {"qk_head_dim", 16},
                                 {"qk_pos_emb_head_dim", 8},
                                 {"v_head_dim", 16},
                                 {"qk_layernorm", true},
                                 {"rope_type", "yarn"},
                                 {"yarn_original_max_position_embeddings", 32},
                                 {"num_experts", 16},
                                 {"moe_router_topk", 4},
                                 {"moe_ffn_hidden_size", 16},
                                 {"moe_shared_expert_intermediate_size", 16},
                                 {"moe_layer_freq", "[0,1,1]"},
                                 {"moe_router_score_function", "sigmoid"},
                                 {"moe_router_enable_expert_bias", true},
                                 {"moe_router_num_groups", 4},
                                 {"moe_router_group_topk", 2},
                                 {"untie_embeddings_and_output_weights", true}};
    for (const auto& [key, value] : want.items()) EXPECT_EQ(m.at(key), value) << key;
    EXPECT_NEAR(m.at("moe_router_topk_scaling_factor").get<double>(), 2.5, 1e-6);
    EXPECT_NEAR(m.at("rotary_scaling_factor").get<double>(), 4.0, 1e-6);
    EXPECT_NEAR(m.at("mscale_all_dim").get<double>(), 0.8, 1e-6);
    // Decoding at TP2 x EP2 runs on the two TP ranks (the experts split over them).
    const std::string flags = l.tp == 1 ? "" : " --tensor-model-parallel-size 2 "
                                               "--expert-model-parallel-size 2";
    expect_judge_agrees(l.tp == 1 ? megatron() : mpirun(2), flags, ckpt, hf, dir,
                        std::string("deepseek_v3_") + l.tag, kDeepseekJudge);
    if (HasFatalFailure()) return;
    expect_exports_back(ckpt, hf, dir.file(std::string("back_") + l.tag), deepseek_same(true));
  }
  // The judge is not blind to what was converted: the generation judged above
  // is refused against the folder with the expert bias zeroed, and against it
  // with the softmax scale's mscale_all_dim dropped.
  const std::string gen = dir.file("deepseek_v3_tp1_gen.json");
  const std::string no_bias = dir.file("no_bias"), no_mscale = dir.file("no_mscale");
  for (const std::string& copy : {no_bias, no_mscale})
    std::filesystem::copy(hf, copy, std::filesystem::copy_options::recursive);
  edit_tensors(no_bias, "[t[n].zero_() for n in t if n.endswith('e_score_correction_bias')]");
  nlohmann::json rs = nlohmann::json::parse(read_text(hf + "/config.json")).at("rope_scaling");
  rs["mscale_all_dim"] = 0;
  edit_config(no_mscale, "rope_scaling", rs);
  for (const std::string& spoiled : {no_bias, no_mscale}) {
    const RunResult j = run(kDeepseekJudge + " score --hf-dir " + spoiled + " --json " + gen);
    EXPECT_EQ(j.exit_code, 1) << spoiled << ": the judge should see the change\n" << j.output;
  }
}

// V2-Lite's YaRN (mscale = mscale_all_dim = 0.707): the softmax scaled by
// mscale(factor, mscale_all_dim)^2 as DeepSeek's own V2 code computes it.
TEST(DeepseekConvert, V2WithAPlainQProjectionAndGroupLimitedGreedyDecodesToTheJudgesLogProbs) {
  require_torch();
  TempDir dir;
  const std::string hf = dir.file("hf"), ckpt = dir.file("ckpt");
  make_deepseek_folder(dir, hf, 8,
                       " --version v2 --layers 3 --experts 16 --topk 2 --groups 4 --topk-group 2"
                       " --shared 2 --scaling 2.0 --dense-layers 1 --q-lora-rank 0"
                       " --yarn 4,32,0.707,0.707 --max-pos 128");
  if (HasFatalFailure()) return;
  const RunResult c = run(convert(import_flags(hf, ckpt, 2, 1)));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("convert: deepseek_v2 "), std::string::npos) << c.output;
  const nlohmann::json m =
      nlohmann::json::parse(read_text(ckpt + "/release/meta.json")).at("args").at("model");
  EXPECT_EQ(m.at("q_lora_rank"), 0);
  EXPECT_EQ(m.at("rope_type"), "yarn");
  EXPECT_NEAR(m.at("mscale_all_dim").get<double>(), 0.707, 1e-6);
  EXPECT_EQ(m.at("moe_router_score_function"), "softmax");
  EXPECT_EQ(m.at("moe_router_pre_softmax"), true);
  EXPECT_EQ(m.at("moe_router_enable_expert_bias"), false);
  EXPECT_EQ(m.at("moe_router_group_topk"), 2);
  EXPECT_EQ(m.at("moe_shared_expert_intermediate_size"), 32);
  expect_judge_agrees(mpirun(2), " --tensor-model-parallel-size 2", ckpt, hf, dir,
                      "deepseek_v2_tp2", kDeepseekJudge);
  if (HasFatalFailure()) return;
  expect_exports_back(ckpt, hf, dir.file("back"), deepseek_same(false));
}

// rope_interleave false (RoPE on the stored halves of the rope features):
// the import permutes the rope rows of q_b_proj and kv_a_proj_with_mqa into
// Megatron's pairs; the judge agrees, and so it does with the export, which
// is written interleaved (rope_interleave true). Read as interleaved, the
// same tensors give other log-probabilities (the permutation is felt).
TEST(DeepseekConvert, V3WithRopeInterleaveFalseImportsPermutedAndExportsInterleaved) {
  require_torch();
  TempDir dir;
  const std::string hf = dir.file("hf"), ckpt = dir.file("ckpt"), back = dir.file("back");
  make_deepseek_folder(dir, hf, 5, std::string(kV3Sizes) + " --rope-halves");
  if (HasFatalFailure()) return;
  const RunResult c = run(convert(import_flags(hf, ckpt, 1, 1)));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  expect_judge_agrees(megatron(), "", ckpt, hf, dir, "deepseek_v3_halves", kDeepseekJudge);
  if (HasFatalFailure()) return;
  const RunResult e =
      run(convert(" --loader megatron --saver hf --load-dir " + ckpt + " --save-dir " + back));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_EQ(nlohmann::json::parse(read_text(back + "/config.json")).at("rope_interleave"), true);
  const std::string gen = dir.file("deepseek_v3_halves_gen.json");
  const RunResult j = run(kDeepseekJudge + " score --hf-dir " + back + " --json " + gen);
  EXPECT_EQ(j.exit_code, 0) << "the interleaved export computes the same\n" << j.output;
  edit_config(hf, "rope_interleave", true);
  const RunResult misread = run(kDeepseekJudge + " score --hf-dir " + hf + " --json " + gen);
  EXPECT_EQ(misread.exit_code, 1) << "read as interleaved the folder is another model\n"
                                  << misread.output;
}

// The V3 folder imported at TP2 x EP2 fine-tunes on 4 ranks (TP2 with SP,
// EP2, DP2: the experts from their expert directories); the export holds
// moved weights, the expert bias moved by its load-balancing update among
// them, and the judge scores it as generate and score report.
TEST(DeepseekConvert, ImportedAtTp2Ep2FineTunesOnFourRanksAndExportsWhatTheJudgeScores) {
  require_torch();
  TempDir dir;
  const std::string hf = dir.file("hf"), r0 = dir.file("r0"), tuned = dir.file("tuned");
  make_deepseek_folder(dir, hf, 5, kV3Sizes);
  if (HasFatalFailure()) return;
  ASSERT_EQ(run(convert(import_flags(hf, r0, 2, 2))).exit_code, 0);
  write_text(dir.file("corpus.txt"), synthetic_corpus(40));
  ASSERT_EQ(run(megatron() + " preprocess --input " + dir.file("corpus.txt") + " --output-prefix " +
                dir.file("data") + " --tokenizer-type Llama2Tokenizer --tokenizer-model " + hf +
                "/tokenizer.model --append-eod").exit_code, 0);
  const RunResult t = run(
      mpirun(4) + " train --use-checkpoint-args --data-path " + dir.file("data_text_document") +
      " --seq-length 32 --micro-batch-size 2 --global-batch-size 4 --lr 1e-2 --log-interval 1"
      " --peak-tflops 1 --split 90,10,0 --eval-interval 0 --tensor-model-parallel-size 2"
      " --sequence-parallel --expert-model-parallel-size 2 --train-iters 3 --load " + r0 +
      " --save " + tuned);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  EXPECT_NE(t.output.find("loaded checkpoint from " + r0 + " at iteration 0"), std::string::npos)
      << t.output;
  const std::string back = dir.file("back");
  const RunResult e =
      run(convert(" --loader megatron --saver hf --load-dir " + tuned + " --save-dir " + back));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  const auto a = read_hf_tensors(hf), b = read_hf_tensors(back);
  EXPECT_EQ(a.size(), b.size());
  for (const char* name : {"model.layers.1.mlp.gate.weight",
                           "model.layers.1.mlp.gate.e_score_correction_bias",
                           "model.layers.2.self_attn.kv_b_proj.weight"})
    EXPECT_FALSE(a.at(name).bytes == b.at(name).bytes) << name << " did not move";
  expect_judge_agrees(megatron(), "", tuned, back, dir, "deepseek_v3_tuned", kDeepseekJudge);
}

// A DeepSeek-V3-shaped model trained here on 4 ranks (TP2 x EP2 with SP: the
// expert bias moved by training) exports as deepseek_v3; the judge scores the
// folder as generate and score report from the checkpoint, and the folder imports and
// exports back byte for byte.
TEST(DeepseekConvert, TrainedAtTp2Ep2ExportsAFolderTheJudgeScoresAsGenerateReports) {
  require_torch();
  TempDir dir;
  const std::string data = tokenized_corpus("llama", dir);
  ASSERT_FALSE(data.empty());
  const std::string ckpt = dir.file("ckpt"), hf = dir.file("hf");
  const RunResult t = run(
      mpirun(4) + " train" + data + tiny_model_flags() +
      " --max-position-embeddings 64 --swiglu --ffn-hidden-size 64 --init-method-std 0.2"
      " --normalization RMSNorm --disable-bias-linear --position-embedding-type rope"
      " --untie-embeddings-and-output-weights --norm-epsilon 1e-6 --multi-latent-attention"
      " --q-lora-rank 12 --kv-lora-rank 8 --qk-head-dim 8 --qk-pos-emb-head-dim 4 --v-head-dim 6"
      " --qk-layernorm --rotary-scaling-factor 4 --mscale 0.9 --mscale-all-dim 0.7"
      " --yarn-original-max-position-embeddings 16 --num-experts 8 --moe-router-topk 4"
      " --moe-ffn-hidden-size 16 --moe-layer-freq '[0,1]' --moe-shared-expert-intermediate-size 16"
      " --moe-router-score-function sigmoid --moe-router-enable-expert-bias"
      " --moe-router-num-groups 4 --moe-router-group-topk 2 --moe-router-topk-scaling-factor 2.5"
      " --tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 2"
      " --train-iters 6 --eval-interval 0 --save " + ckpt);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const RunResult c =
      run(convert(" --loader megatron --saver hf --load-dir " + ckpt + " --save-dir " + hf));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  const nlohmann::json cfg = nlohmann::json::parse(read_text(hf + "/config.json"));
  EXPECT_EQ(cfg.at("architectures"), nlohmann::json({"DeepseekV3ForCausalLM"}));
  EXPECT_EQ(cfg.at("first_k_dense_replace"), 1);
  EXPECT_EQ(cfg.at("n_group"), 4);
  EXPECT_EQ(cfg.at("topk_group"), 2);
  EXPECT_EQ(cfg.at("n_shared_experts"), 1);
  EXPECT_EQ(cfg.at("q_lora_rank"), 12);
  EXPECT_EQ(cfg.at("rope_scaling").at("original_max_position_embeddings"), 16);
  EXPECT_NEAR(cfg.at("routed_scaling_factor").get<double>(), 2.5, 1e-6);
  expect_judge_agrees(megatron(), "", ckpt, hf, dir, "deepseek_v3_trained",
                      kDeepseekJudge);
  if (HasFatalFailure()) return;
  const std::string again = dir.file("again");
  const RunResult i = run(convert(import_flags(hf, again, 1, 1)));
  ASSERT_EQ(i.exit_code, 0) << i.output;
  expect_exports_back(again, hf, dir.file("back"), deepseek_same(true));
}

// The first JSON log line of `path` (train --log-json).
nlohmann::json first_log_line(const std::string& path) {
  const std::string text = read_text(path);
  return nlohmann::json::parse(text.substr(0, text.find('\n')));
}

// A V3 folder with a multi-token prediction depth (model.layers.3.*: enorm,
// hnorm, eh_proj, an MoE decoder layer, shared_head.norm, and the copies of
// the embedding and lm_head) imports it as mtp.layers.0.* at TP1 and at TP2 x
// EP2; one training step on a one-sample dataset logs the main and the MTP
// loss the judge computes for that sample (and a judge reading eh_proj's
// halves the other way round disagrees); the export holds every tensor byte
// for byte. A depth whose copy of the embedding differs is refused naming it;
// config.json counting a depth whose tensors the folder lacks imports without it.
TEST(DeepseekConvert, V3WithAnMtpDepthImportsItTrainsToTheJudgesLossesAndExportsBack) {
  require_torch();
  TempDir dir;
  const std::string hf = dir.file("hf");
  make_deepseek_folder(dir, hf, 5, std::string(kV3Sizes) + " --mtp 1");
  if (HasFatalFailure()) return;
  // One document of s tokens, s even (SP splits it over TP2): a run's samples
  // are all the same, the document and its first token again.
  std::string data;
  int32_t s = 0;
  for (const char* text : {"the quick brown fox jumps over the lazy dog while five wizards box",
                           "the quick brown fox jumps over the lazy dog while five wizards jump",
                           "pack my box with five dozen liquor jugs and judge my vow"}) {
    write_text(dir.file("doc.txt"), std::string(text) + "\n");
    data = dir.file("doc_text_document");
    std::filesystem::remove(data + ".idx");
    std::filesystem::remove(data + ".bin");
    ASSERT_EQ(run(megatron() + " preprocess --input " + dir.file("doc.txt") + " --output-prefix " +
                  dir.file("doc") + " --tokenizer-type Llama2Tokenizer --tokenizer-model " + hf +
                  "/tokenizer.model --append-eod").exit_code, 0);
    const std::string idx = read_text(data + ".idx");
    ASSERT_GE(idx.size(), 38u);
    std::memcpy(&s, idx.data() + 34, 4);  // the first sequence's length (one document)
    if (s % 2 == 0) break;
  }
  ASSERT_EQ(s % 2, 0) << "no text of an even token count";
  // The judge's losses over a vocabulary padded as the run's (Megatron's
  // softmax counts the padding rows, copies of the last one).
  auto judge_losses = [&](const std::string& folder, int64_t padded_vocab) {
    const RunResult j = run(kDeepseekJudge + " losses --hf-dir " + folder + " --data-prefix " +
                            data + " --seq-length " + std::to_string(s) + " --padded-vocab " +
                            std::to_string(padded_vocab));
    EXPECT_EQ(j.exit_code, 0) << j.output;
    return j.exit_code == 0 ? nlohmann::json::parse(j.output) : nlohmann::json();
  };
  struct Layout {
    const char* tag;
    int tp, ep, ranks;
  };
  for (const Layout& l : {Layout{"tp1", 1, 1, 1}, Layout{"tp2ep2", 2, 2, 4}}) {
    const std::string ckpt = dir.file(l.tag);
    const RunResult c = run(convert(import_flags(hf, ckpt, l.tp, l.ep)));
    ASSERT_EQ(c.exit_code, 0) << l.tag << "\n" << c.output;
    EXPECT_NE(c.output.find("convert: 1 multi-token prediction depth(s), model.layers.3.* on -> "
                            "mtp.layers.*"),
              std::string::npos)
        << c.output;
    const nlohmann::json meta = nlohmann::json::parse(read_text(ckpt + "/release/meta.json"));
    EXPECT_EQ(meta.at("args").at("model").at("mtp_num_layers"), 1);
    const int64_t padded_vocab = meta.at("args").at("model").at("padded_vocab_size");
    const nlohmann::json want = judge_losses(hf, padded_vocab);
    ASSERT_EQ(want.at("mtp_losses").size(), 1u) << want;
    // Two samples a step (the same tokens): DP2 at TP2 x EP2.
    const std::string log = dir.file(std::string(l.tag) + ".jsonl");
    const RunResult t = run(
        (l.ranks == 1 ? megatron() : mpirun(l.ranks)) + " train --use-checkpoint-args --load " +
        ckpt + " --data-path " + data + " --split 100,0,0 --seq-length " + std::to_string(s) +
        " --micro-batch-size 1 --global-batch-size 2 --train-iters 1 --lr 1e-3 --eval-interval 0"
        " --hidden-dropout 0 --attention-dropout 0 --peak-tflops 1 --log-interval 1 --log-json " +
        log +
        (l.tp > 1 ? " --tensor-model-parallel-size 2 --sequence-parallel"
                    " --expert-model-parallel-size 2"
                  : ""));
    ASSERT_EQ(t.exit_code, 0) << l.tag << "\n" << t.output;
    const nlohmann::json got = first_log_line(log);
    EXPECT_NEAR(got.at("loss").get<double>(), want.at("lm_loss").get<double>(), 1e-5) << l.tag;
    EXPECT_NEAR(got.at("mtp_1_loss").get<double>(), want.at("mtp_losses")[0].get<double>(), 1e-5)
        << l.tag;
    if (std::string(l.tag) == "tp2ep2") {
      SameAsImported same = deepseek_same(true);
      same.keys.push_back("num_nextn_predict_layers");
      expect_exports_back(ckpt, hf, dir.file("back"), same);
    }
  }
  // eh_proj's input is [enorm(embedding) | hnorm(hidden)]: the other order is another loss.
  const std::string swapped = dir.file("swapped");
  std::filesystem::copy(hf, swapped, std::filesystem::copy_options::recursive);
  edit_tensors(swapped, "n = 'model.layers.3.eh_proj.weight'; "
                        "t[n] = torch.cat(t[n].chunk(2, dim=1)[::-1], dim=1).contiguous()");
  const nlohmann::json want = judge_losses(hf, 128), other = judge_losses(swapped, 128);
  ASSERT_FALSE(other.is_null());
  EXPECT_GT(std::fabs(other.at("mtp_losses")[0].get<double>() -
                      want.at("mtp_losses")[0].get<double>()),
            1e-3);
  // A depth's embedding must be the model's; without its tensors the depth is dropped.
  const std::string odd = dir.file("odd"), odd_ckpt = dir.file("odd_ckpt");
  std::filesystem::copy(hf, odd, std::filesystem::copy_options::recursive);
  edit_tensors(odd, "t['model.layers.3.embed_tokens.weight'][0, 0] += 1");
  const RunResult r = run(convert(import_flags(odd, odd_ckpt, 1, 1)));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("model.layers.3.embed_tokens.weight differs from "
                          "model.embed_tokens.weight but a multi-token prediction depth shares"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(exists(odd_ckpt));
  const std::string trimmed = dir.file("trimmed"), trimmed_ckpt = dir.file("trimmed_ckpt");
  std::filesystem::copy(hf, trimmed, std::filesystem::copy_options::recursive);
  edit_tensors(trimmed, "[t.pop(n) for n in list(t) if n.startswith('model.layers.3.')]");
  const RunResult d = run(convert(import_flags(trimmed, trimmed_ckpt, 1, 1)));
  ASSERT_EQ(d.exit_code, 0) << d.output;
  EXPECT_NE(d.output.find("num_nextn_predict_layers 1 but no model.layers.3.* tensors: imported "
                          "without multi-token prediction"),
            std::string::npos)
      << d.output;
  EXPECT_EQ(nlohmann::json::parse(read_text(trimmed_ckpt + "/release/meta.json"))
                .at("args").at("model").at("mtp_num_layers"),
            0);
}

// A folder of kV3Sizes converts; with config.json's `key` set to `value` (or
// the tensors edited by `python`) the import fails naming `expect` and writes nothing.
void expect_refused(const TempDir& dir, const std::string& hf, const std::string& tag,
                    const std::string& key, const nlohmann::json& value,
                    const std::string& expect, const std::string& python = "") {
  const std::string copy = dir.file("hf_" + tag), ckpt = dir.file("ckpt_" + tag);
  std::filesystem::copy(hf, copy, std::filesystem::copy_options::recursive);
  if (!key.empty()) edit_config(copy, key, value);
  if (!python.empty()) edit_tensors(copy, python);
  const RunResult c = run(convert(import_flags(copy, ckpt, 1, 1)));
  EXPECT_NE(c.exit_code, 0) << tag << "\n" << c.output;
  EXPECT_NE(c.output.find(expect), std::string::npos) << tag << "\n" << c.output;
  EXPECT_FALSE(exists(ckpt)) << tag << ": nothing may be written";
}

TEST(DeepseekConvert, WhatMegatronsRouterOrMlaDoNotComputeIsRefusedByKey) {
  require_torch();
  TempDir dir;
  const std::string hf = dir.file("hf");
  make_deepseek_folder(dir, hf, 5, kV3Sizes);
  if (HasFatalFailure()) return;
  const RunResult ok = run(convert(import_flags(hf, dir.file("ok"), 1, 1)));
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  expect_refused(dir, hf, "topk_group", "topk_group", 1,
                 "config.json: topk_group = 1 is not supported: DeepseekV3TopkRouter ranks a "
                 "group by the sum of its top 2 scores");
  expect_refused(dir, hf, "norm", "norm_topk_prob", false,
                 "config.json: norm_topk_prob = false is not supported");
  expect_refused(dir, hf, "scoring", "scoring_func", "softmax",
                 "config.json: scoring_func = \"softmax\" is not supported");
  expect_refused(dir, hf, "eps", "rms_norm_eps", 1e-5, "config.json: rms_norm_eps = 1e-05");
  expect_refused(dir, hf, "kv_heads", "num_key_value_heads", 2,
                 "config.json: num_key_value_heads = 2 is not supported");
  expect_refused(dir, hf, "rope", "rope_scaling",
                 nlohmann::json{{"type", "linear"}, {"factor", 2.0}},
                 "config.json: rope_scaling = {\"factor\":2.0,\"type\":\"linear\"}");
  expect_refused(dir, hf, "freq", "moe_layer_freq", 2,
                 "config.json: moe_layer_freq = 2 is not supported");
  expect_refused(dir, hf, "mtp", "num_nextn_predict_layers", 1,
                 "tensor 'model.layers.3.enorm.weight' (shape (64) for its config.json) is missing",
                 "t['model.layers.3.eh_proj.weight'] = torch.zeros(64, 128)");
}

// A model with MLA that DeepSeek's folders cannot hold (sigmoid routing
// without the expert bias, the default norm epsilon 1e-5, YaRN whose factor is
// not max positions / original positions) is refused on export naming each,
// and nothing is written.
TEST(DeepseekConvert, AnMlaModelDeepseekCannotHoldIsRefusedOnExportNamingWhat) {
  TempDir dir;
  const std::string data = tokenized_corpus("llama", dir);
  ASSERT_FALSE(data.empty());
  const std::string ckpt = dir.file("ckpt"), hf = dir.file("hf");
  const RunResult t = run(
      megatron() + " train" + data + tiny_model_flags() +
      " --swiglu --ffn-hidden-size 64 --normalization RMSNorm --disable-bias-linear"
      " --position-embedding-type rope --multi-latent-attention --kv-lora-rank 8 --qk-head-dim 8"
      " --qk-pos-emb-head-dim 4 --v-head-dim 6 --qk-layernorm --rotary-scaling-factor 4"
      " --yarn-original-max-position-embeddings 16 --num-experts 4"
      " --moe-router-topk 2 --moe-ffn-hidden-size 16 --moe-shared-expert-intermediate-size 16"
      " --moe-router-score-function sigmoid --train-iters 6 --eval-interval 0 --save " + ckpt);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const RunResult c =
      run(convert(" --loader megatron --saver hf --load-dir " + ckpt + " --save-dir " + hf));
  EXPECT_NE(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("no Hugging Face equivalent: nearest is deepseek_v3 but it has"),
            std::string::npos)
      << c.output;
  EXPECT_NE(c.output.find("no --moe-router-enable-expert-bias (deepseek_v3: "
                          "e_score_correction_bias)"),
            std::string::npos)
      << c.output;
  EXPECT_NE(c.output.find("a norm epsilon other than 1e-6"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("--max-position-embeddings 32 not --rotary-scaling-factor x "
                          "--yarn-original-max-position-embeddings"),
            std::string::npos)
      << c.output;
  EXPECT_FALSE(exists(hf + "/config.json"));
}

}  // namespace deepseek_convert_test
}  // namespace mt::test
