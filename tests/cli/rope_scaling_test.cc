// Llama 3.1's RoPE scaling (--use-rope-scaling, --rope-scaling-factor and our
// --rope-scaling-{low,high}-freq-factor / --rope-scaling-original-max-position-embeddings)
// trains equal to one rank under TP x SP, PP, CP (the ring, whose chunks use
// the one table at their global positions) and DP with the distributed
// optimizer, and in bf16; the flag changes the losses (the scaling is felt at
// these positions); a checkpoint records the five values and a resume with
// other ones is refused naming the flag; without rope positions it is refused.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "layout_match_util.h"

namespace mt::test {
namespace rope_scaling_test {

// Llama-shaped, head dim 8 (inv_freq 1, 0.1, 0.01, 0.001: wavelengths 6.3,
// 63, 628, 6283). Original positions 64 put them in all three regimes:
// 6.3 < 64 / 4 kept, 63 between 16 and 64 interpolated, the others / factor.
// Init std 0.2: at 0.02 attention is nearly uniform and the scaling moves the
// first loss by only ~1e-5 (measured); at 0.2 by ~0.09, far above the tolerances.
const std::string kModel =
    " --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32"
    " --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 8 --lr 3e-3"
    " --min-lr 3e-4 --lr-decay-style cosine --lr-warmup-iters 2 --weight-decay 0.1"
    " --clip-grad 1.0 --split 90,10,0 --peak-tflops 1 --log-interval 1"
    " --normalization RMSNorm --position-embedding-type rope --swiglu --ffn-hidden-size 64"
    " --group-query-attention --num-query-groups 2 --disable-bias-linear"
    " --hidden-dropout 0.1 --attention-dropout 0.1 --init-method-std 0.2"
    " --train-iters 6 --eval-interval 3 --eval-iters 1";
const std::string kScaling =
    " --use-rope-scaling --rope-scaling-factor 8 --rope-scaling-low-freq-factor 1"
    " --rope-scaling-high-freq-factor 4 --rope-scaling-original-max-position-embeddings 64";

TEST(RopeScaling, EveryLayoutMatchesOneRank) {
  expect_layouts_match_one_rank(
      kModel + kScaling,
      {{"tp2_sp", 2, " --tensor-model-parallel-size 2 --sequence-parallel"},
       {"pp2", 2, " --pipeline-model-parallel-size 2"},
       {"cp2", 2, " --context-parallel-size 2"},
       {"dp2_zero", 2, " --use-distributed-optimizer"}},
      1e-5, {"loss"}, "RoPE scaling, fp32");
  // bf16 at the init of the other bf16 layout tests (0.02): at 0.2 the larger
  // activations round apart by up to 2.7e-4 (measured), in bf16 alone.
  std::string bf16 = kModel + kScaling + " --bf16";
  bf16.replace(bf16.find("--init-method-std 0.2"), 21, "--init-method-std 0.02");
  expect_layouts_match_one_rank(
      bf16,
      {{"tp2_sp_bf16", 2, " --tensor-model-parallel-size 2 --sequence-parallel"},
       {"cp2_bf16", 2, " --context-parallel-size 2"}},
      1e-4, {"loss"}, "RoPE scaling, bf16");
}

// The first iteration's loss: the scaling moves it (measured 5.7158 vs 5.7106,
// 500 times the fp32 layout tolerance).
TEST(RopeScaling, ChangesTheLossesAndIsRecordedAndCompared) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(100));
  std::string flags = kModel;
  flags.replace(flags.find("--train-iters 6"), 15, "--train-iters 3");
  flags.replace(flags.find("--eval-interval 3"), 17, "--eval-interval 0");
  const std::string save = dir.file("ckpt");
  const RunResult with = run(megatron() + " train" + data + flags + kScaling + " --save " + save +
                             " --log-json " + dir.file("with.json"));
  ASSERT_EQ(with.exit_code, 0) << with.output;
  const RunResult without =
      run(megatron() + " train" + data + flags + " --log-json " + dir.file("without.json"));
  ASSERT_EQ(without.exit_code, 0) << without.output;
  const double a = read_log_json(dir.file("with.json")).train.at(1).at("loss").get<double>();
  const double b = read_log_json(dir.file("without.json")).train.at(1).at("loss").get<double>();
  std::printf("loss at iteration 1: with scaling %.8f, without %.8f\n", a, b);
  EXPECT_GT(std::abs(a - b), 1e-3);

  const nlohmann::json model =
      nlohmann::json::parse(read_text(save + "/iter_0000003/meta.json")).at("args").at("model");
  EXPECT_EQ(model.at("use_rope_scaling"), true);
  EXPECT_EQ(model.at("rope_scaling_factor"), 8.0);
  EXPECT_EQ(model.at("rope_scaling_low_freq_factor"), 1.0);
  EXPECT_EQ(model.at("rope_scaling_high_freq_factor"), 4.0);
  EXPECT_EQ(model.at("rope_scaling_original_max_position_embeddings"), 64);

  std::string more = flags;
  more.replace(more.find("--train-iters 3"), 15, "--train-iters 5");
  const std::string resume = megatron() + " train" + data + more + " --load " + save;
  const RunResult ok = run(resume + kScaling);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  const RunResult off = run(resume);
  EXPECT_NE(off.exit_code, 0);
  EXPECT_NE(off.output.find("add --use-rope-scaling"), std::string::npos) << off.output;
  std::string other = kScaling;
  other.replace(other.find("--rope-scaling-factor 8"), 23, "--rope-scaling-factor 4");
  const RunResult factor = run(resume + other);
  EXPECT_NE(factor.exit_code, 0);
  EXPECT_NE(factor.output.find("pass --rope-scaling-factor 8"), std::string::npos)
      << factor.output;
  other = kScaling;
  other.replace(other.find("max-position-embeddings 64"), 26, "max-position-embeddings 32");
  const RunResult original = run(resume + other);
  EXPECT_NE(original.exit_code, 0);
  EXPECT_NE(original.output.find("--rope-scaling-original-max-position-embeddings 64"),
            std::string::npos)
      << original.output;
}

TEST(RopeScaling, BadValuesAreRefusedByFlag) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(40));
  std::string learned = kModel;
  learned.replace(learned.find("--position-embedding-type rope"), 30,
                  "--position-embedding-type learned_absolute");
  const RunResult a = run(megatron() + " train" + data + learned + " --use-rope-scaling");
  EXPECT_NE(a.exit_code, 0);
  EXPECT_NE(a.output.find("--use-rope-scaling scales RoPE's frequencies but "
                          "--position-embedding-type is learned_absolute"),
            std::string::npos)
      << a.output;
  const RunResult b = run(megatron() + " train" + data + kModel +
                          " --use-rope-scaling --rope-scaling-factor 0.5");
  EXPECT_NE(b.exit_code, 0);
  EXPECT_NE(b.output.find("--rope-scaling-factor 0.5 must be a finite number >= 1"),
            std::string::npos)
      << b.output;
  const RunResult c = run(megatron() + " train" + data + kModel +
                          " --use-rope-scaling --rope-scaling-high-freq-factor 0.5");
  EXPECT_NE(c.exit_code, 0);
  EXPECT_NE(c.output.find("--rope-scaling-high-freq-factor 0.5"), std::string::npos) << c.output;
}

}  // namespace rope_scaling_test
}  // namespace mt::test
