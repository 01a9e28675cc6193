// The Llama-style configuration of the one decoder (RMSNorm, RoPE, SwiGLU,
// grouped-query attention, no biases, untied output layer) under mpirun
// equals one rank — per-iteration losses and the final weights gathered from
// every (TP, PP) shard, dropout on — for tensor, sequence, pipeline
// (interleaved) and data parallelism with the distributed optimizer, and in
// bf16; a checkpoint saved at TP2 x PP2 resumes at TP1 x PP1 and at PP4 with
// the same losses; generate runs from it on one rank and on TP ranks.
#include <cmath>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "checkpoint_test_util.h"
#include "cli_test_util.h"

namespace mt::test {
namespace llama_test {

std::string llama_flags() {
  return tiny_model_flags() +
         " --num-layers 4 --normalization RMSNorm --position-embedding-type rope --swiglu"
         " --ffn-hidden-size 64 --group-query-attention --num-query-groups 2"
         " --disable-bias-linear --untie-embeddings-and-output-weights"
         " --attention-softmax-in-fp32";
}

struct Layout {
  int tp, pp, dp;
  bool sp;
  const char* extra;
};

std::string layout_flags(const Layout& l) {
  return " --tensor-model-parallel-size " + std::to_string(l.tp) +
         " --pipeline-model-parallel-size " + std::to_string(l.pp) +
         " --make-vocab-size-divisible-by " + std::to_string(128 / l.tp) +
         (l.sp ? " --sequence-parallel" : "") + l.extra;
}

std::string tag_of(const Layout& l) {
  return "tp" + std::to_string(l.tp) + "pp" + std::to_string(l.pp) + "dp" + std::to_string(l.dp) +
         (l.sp ? "sp" : "") +
         (std::string(l.extra).find("virtual") != std::string::npos ? "v2" : "") +
         (std::string(l.extra).find("bf16") != std::string::npos ? "bf16" : "");
}

// Largest relative loss difference over all iterations.
double max_loss_diff(const JsonLogLines& ref, const JsonLogLines& got) {
  double worst = 0;
  for (const auto& [it, j] : ref.train) {
    const double a = j.at("loss").get<double>();
    worst = std::max(worst, std::abs(got.train.at(it).at("loss").get<double>() - a) / a);
  }
  return worst;
}

TEST(Llama, LayoutsMatchOneRank) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(200));
  const std::string flags = " train" + data + llama_flags() +
                            " --micro-batch-size 2 --train-iters 6 --hidden-dropout 0.1"
                            " --attention-dropout 0.1 --eval-interval 3 --eval-iters 2";
  // fp32: round-off only (a reordered sum here and there); bf16: each layout
  // rounds the same operands, but a differently summed fp32 value can round
  // to the other bf16 neighbour.
  const struct {
    Layout l;
    double loss_tol, weight_tol;
  } cases[] = {
      // Measured: losses within 3.5e-9, weights within 1.4e-7 (fp32); bf16
      // 3.2e-6 and 4.2e-4.
      {{2, 1, 1, true, ""}, 1e-7, 1e-6},
      {{2, 2, 1, true, ""}, 1e-7, 1e-6},
      {{1, 2, 2, false, " --num-layers-per-virtual-pipeline-stage 1"}, 1e-7, 1e-6},
      {{2, 2, 2, true, " --num-layers-per-virtual-pipeline-stage 1 --use-distributed-optimizer"},
       1e-7, 1e-6},
      {{2, 1, 2, true, " --bf16"}, 1e-4, 5e-3},
  };
  for (const auto& c : cases) {
    const Layout& l = c.l;
    const std::string tag = tag_of(l);
    const std::string batch = " --global-batch-size " + std::to_string(8 * l.dp);
    const std::string bf16 = std::string(l.extra).find("bf16") != std::string::npos ? " --bf16" : "";
    const RunResult one = run(megatron() + flags + batch + bf16 +
                              " --make-vocab-size-divisible-by 128 --save " + dir.file(tag + "_ref") +
                              " --log-json " + dir.file(tag + "_ref.json"));
    ASSERT_EQ(one.exit_code, 0) << one.output;
    const RunResult r = run(mpirun(l.tp * l.pp * l.dp) + flags + batch + layout_flags(l) +
                            " --save " + dir.file(tag) + " --log-json " + dir.file(tag + ".json"));
    ASSERT_EQ(r.exit_code, 0) << tag << "\n" << r.output;
    const JsonLogLines ref = read_log_json(dir.file(tag + "_ref.json"));
    const JsonLogLines got = read_log_json(dir.file(tag + ".json"));
    ASSERT_EQ(got.train.size(), 6u) << tag;
    expect_same_losses(ref, got, tag, c.loss_tol);
    std::printf("%s: max relative loss difference %.2e\n", tag.c_str(), max_loss_diff(ref, got));
    SafetensorsReader ref_model(dir.file(tag + "_ref/iter_0000006/mp_rank_00_000/model.safetensors"));
    EXPECT_TRUE(ref_model.has("output_layer.weight"));
    EXPECT_FALSE(ref_model.has("embedding.position_embeddings.weight"));
    EXPECT_FALSE(ref_model.has("decoder.layers.0.mlp.linear_fc1.bias"));
    double worst = 0;
    for (const std::string& name : ref_model.names()) {
      std::vector<float> a(static_cast<size_t>(ref_model.info(name).numel()));
      ref_model.read_f32(name, a.data(), int64_t(a.size()));
      const double d = rel_diff(a, gathered(dir.file(tag + "/iter_0000006"), name, l.tp, l.pp));
      EXPECT_LT(d, c.weight_tol) << tag << " " << name;
      worst = std::max(worst, d);
    }
    std::printf("%s: max relative weight difference %.2e\n", tag.c_str(), worst);
  }
}

TEST(Llama, SaveAtTp2Pp2ResumeAtTp1Pp1AndPp4AndGenerate) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(200));
  const std::string flags = " train" + data + llama_flags() +
                            " --micro-batch-size 2 --global-batch-size 8 --train-iters 10"
                            " --make-vocab-size-divisible-by 64 --hidden-dropout 0.1"
                            " --attention-dropout 0.1 --eval-interval 0";
  const std::string tp2pp2 = " --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2";
  const JsonLogLines ref = save_at_5_and_resume(dir, mpirun(4) + flags + tp2pp2);
  ASSERT_EQ(ref.train.size(), 5u);
  const std::pair<std::string, std::string> others[] = {
      {"tp1pp4", mpirun(4) + flags + " --pipeline-model-parallel-size 4"},
      {"tp1pp1", megatron() + flags}};
  for (const auto& [tag, cmd] : others) expect_resume_equal(dir, tag, cmd, ref, 1e-6);

  // Seeded sampling from the TP2 x PP2 checkpoint: the same text on one rank
  // and on two TP ranks (KV cache of 2 query groups, RoPE per position).
  const std::string err = dir.file("gen_stderr.txt");
  const std::string gen = " generate --load " + dir.file("c") +
                          " --prompt 'the ' --max-new-tokens 60 --temperature 1 --seed 3";
  const RunResult g1 = run_stdout(megatron() + gen, err);
  ASSERT_EQ(g1.exit_code, 0) << g1.output << read_text(err);
  const RunResult g2 = run_stdout(mpirun(2) + gen + " --tensor-model-parallel-size 2", err);
  ASSERT_EQ(g2.exit_code, 0) << g2.output << read_text(err);
  EXPECT_EQ(g1.output.rfind("the ", 0), 0u) << g1.output;
  EXPECT_EQ(g1.output, g2.output);
  EXPECT_GT(g1.output.size(), 40u) << g1.output;
}

// Megatron's --use-checkpoint-args: a resume that gives none of the model's
// flags takes them from the checkpoint and continues exactly as one that
// gives them all; a flag given that contradicts the checkpoint is refused.
TEST(Llama, UseCheckpointArgsTakesTheModelFromTheCheckpoint) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(100));
  // The model (given, then adopted) and everything else (given every time).
  const std::string model = " --num-layers 4 --hidden-size 32 --num-attention-heads 4"
                            " --normalization RMSNorm --position-embedding-type rope --swiglu"
                            " --ffn-hidden-size 64 --group-query-attention --num-query-groups 2"
                            " --disable-bias-linear --untie-embeddings-and-output-weights";
  const std::string run_flags = " --seq-length 32 --micro-batch-size 2 --global-batch-size 8"
                                " --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine"
                                " --lr-warmup-iters 1 --lr-decay-iters 10 --weight-decay 0.1"
                                " --clip-grad 1.0 --split 90,10,0 --peak-tflops 1"
                                " --log-interval 1 --eval-interval 0 --hidden-dropout 0"
                                " --attention-dropout 0";
  const RunResult first = run(megatron() + " train" + data + model + run_flags +
                              " --train-iters 4 --save " + dir.file("c"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const RunResult all = run(megatron() + " train" + data + model + run_flags +
                            " --train-iters 7 --load " + dir.file("c") + " --log-json " +
                            dir.file("all.json"));
  ASSERT_EQ(all.exit_code, 0) << all.output;
  const RunResult adopted = run(megatron() + " train" + data + run_flags +
                                " --train-iters 7 --use-checkpoint-args --load " +
                                dir.file("c") + " --log-json " + dir.file("adopted.json"));
  ASSERT_EQ(adopted.exit_code, 0) << adopted.output;
  EXPECT_NE(adopted.output.find("RMSNorm, positions rope"), std::string::npos) << adopted.output;
  expect_same_losses(read_log_json(dir.file("all.json")), read_log_json(dir.file("adopted.json")),
                     "--use-checkpoint-args", 0.0);
  const RunResult wrong = run(megatron() + " train" + data + run_flags +
                              " --train-iters 7 --use-checkpoint-args"
                              " --num-query-groups 4 --load " + dir.file("c"));
  EXPECT_NE(wrong.exit_code, 0) << wrong.output;
  EXPECT_NE(wrong.output.find("--num-query-groups 2 but this run has 4"), std::string::npos)
      << wrong.output;
  const RunResult none = run(megatron() + " train" + data + run_flags +
                             " --train-iters 7 --use-checkpoint-args");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.output.find("--use-checkpoint-args needs a checkpoint"), std::string::npos)
      << none.output;
}

}  // namespace llama_test
}  // namespace mt::test
