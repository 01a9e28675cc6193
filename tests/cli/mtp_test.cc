// Multi-token prediction end to end (--mtp-num-layers, model/mtp.h): one
// rank's losses and each depth's "mtp_k loss" (1e-5 relative; fp32
// round-off) at TP2 with SP, PP2 (the last stage's copy of the untied word
// embedding; also interleaved, the depths on the last chunk), CP2 (the shifted tokens cross the ranks' chunks), DP2 and, for
// an MoE model, EP2 (with DP2, with TP2 x SP, and with --moe-layer-recompute); a checkpoint with MTP saved at TP2 x PP2 resumes at TP1;
// the depth's own expert bias (DeepSeek-V3's routing) moves as one rank's at EP2;
// `generate` ignores the MTP depths (a run whose depths are weighed 0 decodes
// exactly as the same run without them); unsupported combinations are
// refused by name.
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "cli_test_util.h"
#include "layout_match_util.h"

namespace mt::test {
namespace mtp_test {

// Llama-style (Megatron's MTP takes RoPE), untied, dropout on, 6 iterations
// with evaluations at 3 and 6.
std::string mtp_model(int depths, const std::string& scale = "0.3", int layers = 2) {
  return " --num-layers " + std::to_string(layers) + " --hidden-size 32 --num-attention-heads 4 --seq-length 32"
         " --micro-batch-size 2 --global-batch-size 8 --lr 3e-3 --min-lr 3e-4"
         " --lr-decay-style cosine --lr-warmup-iters 2 --weight-decay 0.1 --clip-grad 1.0"
         " --split 90,10,0 --peak-tflops 1 --log-interval 1"
         " --normalization RMSNorm --position-embedding-type rope --swiglu --ffn-hidden-size 64"
         " --disable-bias-linear --untie-embeddings-and-output-weights"
         " --hidden-dropout 0.1 --attention-dropout 0.1 --train-iters 6 --eval-interval 3"
         " --eval-iters 1 --mtp-num-layers " + std::to_string(depths) +
         " --mtp-loss-scaling-factor " + scale;
}

std::vector<const char*> keys(int depths) {
  std::vector<const char*> k = {"loss", "mtp_1_loss"};
  if (depths > 1) k.push_back("mtp_2_loss");
  return k;
}

TEST(MtpCli, LayoutsMatchOneRank) {
  // Each layout once (a few seconds in all): one depth through PP and DP,
  // two (the second shifted across CP chunks, its gradient through the first)
  // through TP with SP and CP.
  const std::pair<int, std::vector<Layout>> runs[] = {
      {1, {{"pp2", 2, " --pipeline-model-parallel-size 2"}, {"dp2", 2, ""}}},
      {2, {{"tp2_sp", 2, " --tensor-model-parallel-size 2 --sequence-parallel"},
           {"cp2", 2, " --context-parallel-size 2"}}}};
  for (const auto& [depths, layouts] : runs) {
    expect_layouts_match_one_rank(
        mtp_model(depths), layouts, 1e-5, keys(depths), "MTP layouts",
        [&](const Layout& l, const RunResult& r, const JsonLogLines& ref,
            const JsonLogLines& got) {
          // The text log names each depth as Megatron does; the depths weigh in.
          EXPECT_NE(r.output.find(" | mtp_" + std::to_string(depths) + " loss: "),
                    std::string::npos)
              << l.tag << "\n" << r.output;
          const double first = ref.train.begin()->second.at("mtp_1_loss").get<double>();
          EXPECT_GT(first, 1.0) << "a cross-entropy over the corpus's vocabulary";
          // The acceptance rates (argmax over the vocabulary-parallel logits):
          // the same tokens, within one near-tie flipped by round-off.
          for (const auto& [it, j] : ref.train)
            for (const char* k : {"mtp_1_acceptance_rate", "mtp_2_acceptance_rate"})
              if (j.contains(k)) {
                EXPECT_NEAR(j.at(k).get<double>(), got.train.at(it).at(k).get<double>(), 0.5)
                    << l.tag << " " << it << " " << k;
              }
        });
  }
  // An interleaved pipeline: the depths on the last stage's last chunk.
  expect_layouts_match_one_rank(
      mtp_model(2, "0.3", 4),
      {{"pp2_v2", 2, " --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1"}},
      1e-5, keys(2), "MTP interleaved");
}

TEST(MtpCli, MoeLayoutsMatchOneRankAtEp2) {
  expect_layouts_match_one_rank(
      mtp_model(1) + " --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 48"
                     " --moe-aux-loss-coeff 0.01",
      {{"ep2", 2, " --expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall"},
       {"tp2_sp_ep2", 2, " --tensor-model-parallel-size 2 --sequence-parallel"
                         " --expert-model-parallel-size 2"},
       // The decoder's and the depth's MoE layers recomputed (their records dropped).
       {"ep2_moe_recompute", 2, " --expert-model-parallel-size 2 --moe-layer-recompute"}},
      1e-5, {"loss", "mtp_1_loss", "load_balancing_loss"}, "MTP MoE layouts",
      [](const Layout& l, const RunResult& r, const JsonLogLines&, const JsonLogLines&) {
        // The MoE part of the text log does not replace the depths' losses.
        EXPECT_NE(r.output.find(" | mtp_1 loss: "), std::string::npos) << l.tag << "\n" << r.output;
        EXPECT_NE(r.output.find(" | load_balancing_loss: "), std::string::npos) << l.tag;
      });
}

// DeepSeek-V3's routing in the decoder and in the MTP depth: the depth's
// router has its own expert bias, moved by its own loads (Megatron updates
// every router's), equal to one rank's at EP2 and TP2 x SP x EP2.
TEST(MtpCli, ExpertBiasOfTheDepthMatchesOneRankAtEp2) {
  TempDir dir;
  const std::string model =
      mtp_model(1) + " --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 48"
                     " --moe-aux-loss-coeff 0.01 --moe-router-score-function sigmoid"
                     " --moe-router-num-groups 2 --moe-router-group-topk 1"
                     " --moe-router-enable-expert-bias --moe-router-bias-update-rate 0.01"
                     " --moe-token-dispatcher-type alltoall";
  auto depth_bias = [&](const std::string& tag) {
    std::vector<float> b(4);
    SafetensorsReader r(dir.file(tag) + "/iter_0000006/mp_rank_00_000/model.safetensors");
    r.read_f32("mtp.layers.0.transformer_layer.mlp.router.expert_bias", b.data(), 4);
    return b;
  };
  const RunResult one = run(megatron() + " train" + prepare_data(dir, synthetic_corpus(200)) +
                            model + vocab_padding("") + " --save " + dir.file("one"));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const std::vector<float> ref = depth_bias("one");
  EXPECT_NE(ref, std::vector<float>(4, 0.f)) << "the depth's expert bias never moved";
  expect_layouts_match_one_rank(
      model,
      {{"ep2", 2, " --expert-model-parallel-size 2 --save " + dir.file("ep2")},
       {"tp2_sp_ep2", 2, " --tensor-model-parallel-size 2 --sequence-parallel"
                         " --expert-model-parallel-size 2 --save " + dir.file("tp2_sp_ep2")}},
      1e-5, {"loss", "mtp_1_loss", "load_balancing_loss"}, "MTP with the expert bias",
      [&](const Layout& l, const RunResult&, const JsonLogLines&, const JsonLogLines&) {
        EXPECT_EQ(depth_bias(l.tag), ref) << l.tag;
      });
}

TEST(MtpCli, CheckpointSavedAtTp2Pp2ResumesAtTp1) {
  TempDir dir;
  const std::string flags = " train" + prepare_data(dir, synthetic_corpus(200)) + mtp_model(2) +
                            " --train-iters 10 --eval-interval 0 --make-vocab-size-divisible-by 32";
  const JsonLogLines ref = save_at_5_and_resume(
      dir, mpirun(4) + flags + " --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2");
  ASSERT_EQ(ref.train.size(), 5u);
  for (const auto& [it, j] : ref.train) EXPECT_GT(j.at("mtp_2_loss").get<double>(), 0.0) << it;
  // The MTP weights are in the checkpoint: the resumed losses (main and MTP) continue as saved.
  expect_resume_equal(dir, "tp1", megatron() + flags, ref, 1e-5);
  const JsonLogLines tp1 = read_log_json(dir.file("tp1.json"));
  for (const auto& [it, j] : ref.train)
    EXPECT_NEAR(tp1.train.at(it).at("mtp_2_loss").get<double>(),
                j.at("mtp_2_loss").get<double>(), 1e-5 * j.at("mtp_2_loss").get<double>())
        << it;
}

TEST(MtpCli, GenerateIgnoresTheDepths) {
  // Depths weighed 0 leave the main weights as a run without them trains
  // them: the two checkpoints differ only by the MTP tensors, and decode alike.
  TempDir dir;
  const std::string data = " train" + prepare_data(dir, synthetic_corpus(200));
  const std::string rest = " --eval-interval 0 --make-vocab-size-divisible-by 64";
  const RunResult with = run(megatron() + data + mtp_model(1, "0") + rest + " --save " +
                             dir.file("with") + " --log-json " + dir.file("with.json"));
  ASSERT_EQ(with.exit_code, 0) << with.output;
  const RunResult without = run(megatron() + data + mtp_model(0) + rest + " --save " +
                                dir.file("without") + " --log-json " + dir.file("without.json"));
  ASSERT_EQ(without.exit_code, 0) << without.output;
  const JsonLogLines a = read_log_json(dir.file("with.json"));
  const JsonLogLines b = read_log_json(dir.file("without.json"));
  ASSERT_EQ(a.train.size(), 6u);
  for (const auto& [it, j] : a.train) {
    EXPECT_EQ(j.at("loss").get<double>(), b.train.at(it).at("loss").get<double>()) << it;
    EXPECT_TRUE(j.contains("mtp_1_loss") && !b.train.at(it).contains("mtp_1_loss"));
  }
  const std::string gen = " generate --prompt 'the cat' --max-new-tokens 12 --temperature 0";
  const RunResult ga = run_stdout(megatron() + gen + " --load " + dir.file("with"),
                                  dir.file("with.err"));
  const RunResult gb = run_stdout(megatron() + gen + " --load " + dir.file("without"),
                                  dir.file("without.err"));
  ASSERT_EQ(ga.exit_code, 0) << ga.output << read_text(dir.file("with.err"));
  ASSERT_EQ(gb.exit_code, 0) << gb.output << read_text(dir.file("without.err"));
  EXPECT_GT(ga.output.size(), std::string("the cat").size());
  EXPECT_EQ(ga.output, gb.output);
}

TEST(MtpCli, UnsupportedCombinationsAreRefusedByName) {
  TempDir dir;
  const std::string base = " train" + prepare_data(dir, synthetic_corpus(50)) + mtp_model(1);
  const std::pair<std::string, std::string> cases[] = {
      {megatron() + base + " --position-embedding-type learned_absolute",
       "--position-embedding-type rope"},
      {megatron() + base + " --mtp-num-layers -1", "--mtp-num-layers -1"}};
  for (const auto& [cmd, says] : cases) {
    const RunResult r = run(cmd);
    EXPECT_NE(r.exit_code, 0) << cmd;
    EXPECT_NE(r.output.find(says), std::string::npos) << says << "\n" << r.output;
  }
}

}  // namespace mtp_test
}  // namespace mt::test
