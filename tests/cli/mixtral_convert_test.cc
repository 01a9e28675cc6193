// Mixtral (MixtralForCausalLM) through `megatron convert`, judged by the
// independent PyTorch model of tests/reference/hf_models.py (written from
// Hugging Face's modeling_mixtral: softmax over the router logits in fp32,
// top-k, renormalised, SwiGLU experts, weighted sum):
//  - a random tiny Mixtral folder imported at TP1, at TP2 x PP2 and at
//    TP2 x EP2 decodes (`generate`) and scores (`score --log-probs`, a fixed
//    text) to the judge's log-probabilities within 1e-4, on one rank, on two
//    TP ranks each holding every expert whole, and on two TP ranks that are
//    also the EP group (two experts each, from the expert directories the
//    import wrote);
//  - fine-tuned at TP2 (sequence parallel) x EP2 and exported (the experts
//    read from the training run's expert directories), it is a Mixtral folder
//    the judge scores as `generate` reports;
//  - what a Mixtral checkpoint cannot be is refused with one line naming the
//    key and the fix, before anything is written: config.json keys this
//    decoder does not compute, more experts per token than experts, missing
//    or extra experts, a --target-expert-parallel-size that does not divide
//    the experts; and an MoE model
//    with dense layers or another router has no Mixtral export.
// The bit-exact import -> export round trip is ConvertCli's (convert_test.cc).
#include <cstring>
#include <filesystem>
#include <functional>
#include <sstream>

#include "checkpoint/safetensors.h"
#include "cli_test_util.h"
#include "convert_test_util.h"
#include "disk_fault_util.h"

namespace mt::test {
namespace mixtral_convert_test {

namespace fs = std::filesystem;

TEST(MixtralConvert, ImportedAtTp1Tp2Pp2AndTp2Ep2DecodesAndScoresToTheJudgesLogProbs) {
  require_torch();
  TempDir dir;
  const std::string hf = dir.file("hf");
  make_hf_folder("mixtral", dir, hf, 31);
  if (HasFatalFailure()) return;
  struct Layout {
    int tp, pp, ep;
  };
  for (const Layout& l : {Layout{1, 1, 1}, Layout{2, 2, 1}, Layout{2, 1, 2}}) {
    const std::string tag = "tp" + std::to_string(l.tp) + "pp" + std::to_string(l.pp) + "ep" +
                            std::to_string(l.ep);
    const std::string ckpt = dir.file(tag);
    const RunResult c = run(convert(" --loader mixtral_hf --saver megatron --load-dir " + hf +
                                    " --save-dir " + ckpt + " --target-tensor-parallel-size " +
                                    std::to_string(l.tp) + " --target-pipeline-parallel-size " +
                                    std::to_string(l.pp) + " --target-expert-parallel-size " +
                                    std::to_string(l.ep)));
    ASSERT_EQ(c.exit_code, 0) << c.output;
    EXPECT_NE(c.output.find("every MLP a mixture of 4 experts (ffn 32, top 2"), std::string::npos)
        << c.output;
    const nlohmann::json meta = nlohmann::json::parse(read_text(ckpt + "/release/meta.json"));
    const nlohmann::json& m = meta.at("args").at("model");
    EXPECT_EQ(m.at("num_experts"), 4);
    EXPECT_EQ(m.at("moe_router_topk"), 2);
    EXPECT_EQ(m.at("moe_ffn_hidden_size"), 32);
    EXPECT_EQ(m.at("moe_layer_freq"), "1");
    EXPECT_EQ(m.at("moe_router_pre_softmax"), false);
    EXPECT_NEAR(m.at("moe_aux_loss_coeff").get<double>(), 0.02, 1e-8);  // router_aux_loss_coef
    EXPECT_EQ(meta.at("args").at("converted_from").at("model_type"), "mixtral");
    const std::string rel = ckpt + "/release/";
    if (l.pp == 2) {  // every expert whole on both TP ranks of each stage
      for (const char* stage : {"000", "001"}) {
        SafetensorsReader a(rel + "mp_rank_00_" + stage + "/model.safetensors");
        SafetensorsReader b(rel + "mp_rank_01_" + stage + "/model.safetensors");
        const int layer = stage[2] - '0';  // one layer per stage
        const std::string pre = "decoder.layers." + std::to_string(layer) + ".mlp.";
        for (const std::string& n : {pre + "router.weight",
                                     pre + "experts.local_experts.3.linear_fc1.weight",
                                     pre + "experts.local_experts.0.linear_fc2.weight"}) {
          ASSERT_TRUE(a.has(n) && b.has(n)) << stage << " " << n;
          EXPECT_EQ(a.info(n).shape, b.info(n).shape) << n;
          EXPECT_TRUE(std::memcmp(a.raw(n), b.raw(n), a.info(n).bytes()) == 0) << n;
        }
        EXPECT_EQ(a.info(pre + "router.weight").shape, (std::vector<int64_t>{4, 64}));
        EXPECT_EQ(a.info(pre + "experts.local_experts.3.linear_fc1.weight").shape,
                  (std::vector<int64_t>{64, 64}));  // [w1; w3]: 2 x 32 rows
      }
    }
    if (l.ep == 2) {  // experts 0, 1 in mp_rank_00_000_000, 2, 3 in ..._001; none in mp_rank_TT
      EXPECT_EQ(meta.at("expert_model_parallel_size"), 2);
      SafetensorsReader e0(rel + "mp_rank_00_000_000/model.safetensors");
      SafetensorsReader e1(rel + "mp_rank_00_000_001/model.safetensors");
      SafetensorsReader d1(rel + "mp_rank_01_000/model.safetensors");
      EXPECT_EQ(meta.at("files").size(), 4u) << meta.at("files").dump();
      for (int layer = 0; layer < 2; ++layer) {
        const std::string pre = "decoder.layers." + std::to_string(layer) + ".mlp.";
        for (int x = 0; x < 4; ++x) {
          const std::string n = pre + "experts.local_experts." + std::to_string(x) +
                                ".linear_fc2.weight";
          EXPECT_EQ(e0.has(n), x < 2) << n;
          EXPECT_EQ(e1.has(n), x >= 2) << n;
          EXPECT_FALSE(d1.has(n)) << n;
        }
        EXPECT_TRUE(d1.has(pre + "router.weight"));
      }
    }
    // TP1: one rank; TP2 x PP2: re-sharded on load to two TP ranks; TP2 x EP2:
    // two ranks, each with two experts.
    const std::string flags =
        (l.tp == 1 ? "" : " --tensor-model-parallel-size 2") +
        std::string(l.ep == 1 ? "" : " --expert-model-parallel-size 2");
    expect_judge_agrees(l.tp == 1 ? megatron() : mpirun(2), flags, ckpt, hf, dir, tag);
    if (HasFatalFailure()) return;
  }
  // TP1 x EP2 decodes on lcm(1, 2) = 2 ranks; one rank is refused naming that.
  const RunResult r = run(megatron() + " generate --load " + dir.file("tp2pp1ep2") +
                          " --expert-model-parallel-size 2 --max-new-tokens 2");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(last_error_line(r.output).find("generate with --tensor-model-parallel-size 1 and "
                                           "--expert-model-parallel-size 2 needs exactly 2 ranks; "
                                           "got world size 1; fix: mpirun -n 2"),
            std::string::npos)
      << r.output;
}

TEST(MixtralConvert, FineTunedAtTp2Ep2ExportsAFolderTheJudgeScoresAsGenerateReports) {
  require_torch();
  TempDir dir;
  const std::string hf = dir.file("hf"), r0 = dir.file("r0"), tuned = dir.file("tuned");
  make_hf_folder("mixtral", dir, hf, 32);
  if (HasFatalFailure()) return;
  ASSERT_EQ(run(convert(" --loader hf --saver megatron --load-dir " + hf + " --save-dir " + r0 +
                        " --target-tensor-parallel-size 2")).exit_code, 0);
  write_text(dir.file("corpus.txt"), synthetic_corpus(40));
  ASSERT_EQ(run(megatron() + " preprocess --input " + dir.file("corpus.txt") + " --output-prefix " +
                dir.file("data") + " --tokenizer-type Llama2Tokenizer --tokenizer-model " + hf +
                "/tokenizer.model --append-eod").exit_code, 0);
  const std::string train = " train --use-checkpoint-args --data-path " +
                            dir.file("data_text_document") +
                            " --seq-length 32 --micro-batch-size 2 --global-batch-size 4"
                            " --lr 1e-2 --log-interval 1 --peak-tflops 1 --split 90,10,0"
                            " --eval-interval 0 --tensor-model-parallel-size 2 --sequence-parallel"
                            " --expert-model-parallel-size 2";
  const RunResult t = run(mpirun(2) + train + " --train-iters 3 --load " + r0 + " --save " + tuned);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  EXPECT_NE(t.output.find("loaded checkpoint from " + r0 + " at iteration 0"), std::string::npos)
      << t.output;
  EXPECT_TRUE(exists(tuned + "/iter_0000003/mp_rank_00_000_001/model.safetensors"));
  const std::string back = dir.file("back");
  const RunResult e = run(convert(" --loader megatron --saver hf --load-dir " + tuned +
                                  " --save-dir " + back));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  const nlohmann::json cfg = nlohmann::json::parse(read_text(back + "/config.json"));
  EXPECT_EQ(cfg.at("architectures"), nlohmann::json::array({"MixtralForCausalLM"}));
  EXPECT_EQ(cfg.at("num_local_experts"), 4);
  EXPECT_EQ(cfg.at("num_experts_per_tok"), 2);
  EXPECT_EQ(cfg.at("intermediate_size"), 32);
  EXPECT_TRUE(cfg.at("sliding_window").is_null());
  // The weights moved: the exported router is not the imported one.
  const auto a = read_hf_tensors(hf), b = read_hf_tensors(back);
  EXPECT_EQ(a.size(), b.size());
  EXPECT_FALSE(a.at("model.layers.0.block_sparse_moe.gate.weight").bytes ==
               b.at("model.layers.0.block_sparse_moe.gate.weight").bytes);
  expect_judge_agrees(megatron(), "", tuned, back, dir, "tuned");
}

TEST(MixtralConvert, RefusesWhatItCannotHonourWithOneLineNamingTheKeyAndTheFix) {
  require_torch();
  TempDir dir;
  const std::string base = dir.file("base");
  make_hf_folder("mixtral", dir, base, 33);
  if (HasFatalFailure()) return;
  struct Case {
    std::string tag, flags, expect;
    std::function<void(const std::string&)> spoil;
  };
  const std::string moe = "model.layers.1.block_sparse_moe.experts.";
  const std::vector<Case> cases = {
      {"sliding window 0", "", "'sliding_window' is 0, not an integer >= 1",
       [](const std::string& hf) { edit_config(hf, "sliding_window", 0); }},
      {"activation", "", "hidden_act = \"gelu\" is not supported",
       [](const std::string& hf) { edit_config(hf, "hidden_act", "gelu"); }},
      {"top-k above experts", "", "'num_experts_per_tok' 5 is above 'num_local_experts' 4",
       [](const std::string& hf) { edit_config(hf, "num_experts_per_tok", 5); }},
      {"no expert count", "", "has no 'num_local_experts'",
       [](const std::string& hf) { edit_config(hf, "num_local_experts", nullptr); }},
      {"missing expert", "", "tensor '" + moe + "3.w3.weight' (shape (32, 64)",
       [&](const std::string& hf) { edit_tensors(hf, "del t['" + moe + "3.w3.weight']"); }},
      {"extra expert", "", "unexpected tensor '" + moe + "4.w1.weight'",
       [&](const std::string& hf) {
         edit_tensors(hf, "t['" + moe + "4.w1.weight'] = torch.zeros(32, 64)");
       }},
      {"expert parallel", " --target-expert-parallel-size 3",
       "--target-expert-parallel-size 3 does not divide the 4 experts",
       [](const std::string&) {}},
  };
  for (const Case& c : cases) {
    const std::string hf = dir.file("hf_" + std::to_string(&c - cases.data()));
    const std::string save = hf + "_ckpt";
    fs::copy(base, hf, fs::copy_options::recursive);
    c.spoil(hf);
    const RunResult r = run(convert(" --loader mixtral_hf --saver megatron --load-dir " + hf +
                                    " --save-dir " + save + c.flags));
    EXPECT_NE(r.exit_code, 0) << c.tag << "\n" << r.output;
    const std::string line = last_error_line(r.output);
    EXPECT_NE(line.find(c.expect), std::string::npos) << c.tag << ": " << line << "\n" << r.output;
    EXPECT_NE(line.find("fix: "), std::string::npos) << c.tag << ": " << line;
    EXPECT_FALSE(exists(save + "/latest_checkpointed_iteration.txt")) << c.tag;
    EXPECT_FALSE(exists(save + "/release")) << c.tag;
  }

  // An MoE model with dense layers and Megatron's pre-softmax router is no Mixtral.
  write_text(dir.file("corpus.txt"), synthetic_corpus(20));
  ASSERT_EQ(run(megatron() + " preprocess --input " + dir.file("corpus.txt") + " --output-prefix " +
                dir.file("data") + " --tokenizer-type Llama2Tokenizer --tokenizer-model " + base +
                "/tokenizer.model --append-eod").exit_code, 0);
  const RunResult t = run(megatron() + " train --data-path " + dir.file("data_text_document") +
                          " --tokenizer-type Llama2Tokenizer --tokenizer-model " + base +
                          "/tokenizer.model" + tiny_model_flags() +
                          " --normalization RMSNorm --position-embedding-type rope --swiglu"
                          " --disable-bias-linear --num-experts 4 --moe-layer-freq 2"
                          " --moe-router-pre-softmax --train-iters 1 --lr-warmup-iters 0"
                          " --eval-interval 0 --save " + dir.file("moe"));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const RunResult e = run(convert(" --loader megatron --saver hf --load-dir " + dir.file("moe") +
                                  " --save-dir " + dir.file("moe_hf")));
  EXPECT_NE(e.exit_code, 0) << e.output;
  const std::string line = last_error_line(e.output);
  for (const char* want : {"nearest is mixtral", "dense MLP layers (--moe-layer-freq 2;",
                           "--moe-router-pre-softmax"})
    EXPECT_NE(line.find(want), std::string::npos) << want << " not in: " << line;
  EXPECT_FALSE(exists(dir.file("moe_hf") + "/config.json"));
}

}  // namespace mixtral_convert_test
}  // namespace mt::test
