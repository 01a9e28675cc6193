// Megatron-LM's architecture flags --apply-layernorm-1p (every norm scales by
// 1 + weight, weights start at 0), --squared-relu (relu(x)^2 as the MLP's
// activation, the MoE experts' too), --padded-vocab-size (the vocabulary rows
// as given) and the deprecated spellings --use-rotary-position-embeddings /
// --no-position-embedding: each trains equal to one rank under TP x SP, PP,
// CP and DP with ZeRO (fp32 within 1e-5; bf16 at the bf16 layout tolerance);
// a checkpoint records them and a resume with another value is refused by
// name; `convert --saver hf` refuses them by name; the conflicts Megatron
// refuses are refused.
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "layout_match_util.h"

namespace mt::test {
namespace arch_flags_test {

std::string common_flags() {
  return " --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32"
         " --micro-batch-size 2 --global-batch-size 8 --lr 3e-3 --min-lr 3e-4"
         " --lr-decay-style cosine --lr-warmup-iters 2 --weight-decay 0.1 --clip-grad 1.0"
         " --split 90,10,0 --peak-tflops 1 --log-interval 1 --hidden-dropout 0.1"
         " --attention-dropout 0.1 --train-iters 6 --eval-interval 3 --eval-iters 1";
}

// GPT-2's block (LayerNorm with biases, learned positions) with zero-centred
// norms, squared ReLU and 70 vocabulary rows on every layout.
std::string gpt_flags() {
  return common_flags() + " --apply-layernorm-1p --squared-relu --padded-vocab-size 70";
}

// Llama's block (RMSNorm, no biases) with zero-centred norms (the q/k norms
// too), rope by Megatron's old spellings, and MoE experts of squared ReLU.
std::string llama_moe_flags() {
  return common_flags() +
         " --normalization RMSNorm --disable-bias-linear --apply-layernorm-1p --qk-layernorm"
         " --use-rotary-position-embeddings --no-position-embedding --squared-relu"
         " --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 48";
}

constexpr double kTol = 1e-5;

TEST(ArchFlags, LayerNorm1pAndSquaredReluMatchOneRank) {
  expect_layouts_match_one_rank(
      gpt_flags(),
      {{"tp2_sp", 2, " --tensor-model-parallel-size 2 --sequence-parallel"},
       {"pp2", 2, " --pipeline-model-parallel-size 2"},
       {"cp2", 2, " --context-parallel-size 2"},
       {"dp2_zero", 2, " --use-distributed-optimizer"}},
      kTol, {"loss"}, "--apply-layernorm-1p --squared-relu (GPT)");
}

TEST(ArchFlags, RmsNorm1pOldRopeSpellingsAndSquaredReluExpertsMatchOneRank) {
  expect_layouts_match_one_rank(
      llama_moe_flags(),
      {// --use-rotary-position-embeddings wins over the type given (Megatron's order)
       {"one_rank_learned_given", 1, " --position-embedding-type learned_absolute"},
       {"tp2_sp_ep2", 2,
        " --tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 2"},
       {"pp2", 2, " --pipeline-model-parallel-size 2"},
       {"cp2", 2, " --context-parallel-size 2"},
       {"dp2_zero", 2, " --use-distributed-optimizer"}},
      kTol, {"loss"}, "RMSNorm 1p, old rope spellings, squared-ReLU experts");
}

TEST(ArchFlags, Bf16MatchesOneRank) {
  expect_layouts_match_one_rank(
      gpt_flags() + " --bf16",
      {{"tp2_sp_bf16", 2, " --tensor-model-parallel-size 2 --sequence-parallel"},
       {"cp2_bf16", 2, " --context-parallel-size 2"}},
      1e-4, {"loss"}, "--apply-layernorm-1p --squared-relu, bf16");
}

TEST(ArchFlags, CheckpointRecordsThemAndResumeAndExportRefuseOthers) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(100));
  const std::string save = dir.file("ckpt");
  std::string flags = gpt_flags();
  flags.replace(flags.find("--train-iters 6"), 15, "--train-iters 3");
  flags.replace(flags.find("--eval-interval 3"), 17, "--eval-interval 0");
  const RunResult r = run(megatron() + " train" + data + flags + " --save " + save);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json meta = nlohmann::json::parse(read_text(save + "/iter_0000003/meta.json"));
  const nlohmann::json& model = meta.at("args").at("model");
  EXPECT_EQ(model.at("apply_layernorm_1p"), true);
  EXPECT_EQ(model.at("squared_relu"), true);
  EXPECT_EQ(model.at("padded_vocab_size"), 70);
  const RunResult hf = run(megatron() + " convert --model-type GPT --loader megatron --saver hf"
                           " --load-dir " + save + " --save-dir " + dir.file("hf"));
  EXPECT_NE(hf.exit_code, 0) << hf.output;
  EXPECT_NE(hf.output.find("--apply-layernorm-1p"), std::string::npos) << hf.output;
  EXPECT_NE(hf.output.find("--squared-relu"), std::string::npos) << hf.output;
  EXPECT_FALSE(exists(dir.file("hf") + "/config.json"));
  // A resume without each flag is another model, refused naming the flag.
  flags.replace(flags.find("--train-iters 3"), 15, "--train-iters 4");
  for (const std::string drop : {" --apply-layernorm-1p", " --squared-relu"}) {
    std::string other = flags;
    other.replace(other.find(drop), drop.size(), "");
    const RunResult bad = run(megatron() + " train" + data + other + " --load " + save);
    EXPECT_NE(bad.exit_code, 0) << drop;
    EXPECT_NE(bad.output.find(drop.substr(1)), std::string::npos) << bad.output;
  }
  std::string rows = flags;
  rows.replace(rows.find("--padded-vocab-size 70"), 22, "--padded-vocab-size 72");
  const RunResult bad_rows = run(megatron() + " train" + data + rows + " --load " + save);
  EXPECT_NE(bad_rows.exit_code, 0);
  EXPECT_NE(bad_rows.output.find("--padded-vocab-size 72 differs from the checkpoint's 70"),
            std::string::npos)
      << bad_rows.output;
  // The same flags resume.
  const RunResult same = run(megatron() + " train" + data + flags + " --load " + save);
  EXPECT_EQ(same.exit_code, 0) << same.output;
}

TEST(ArchFlags, ConflictsAreRefusedAsMegatronRefusesThem) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(20));
  const std::string base = megatron() + " train" + data + tiny_model_flags() +
                           " --train-iters 1 --lr-warmup-iters 0 --eval-iters 0";
  const struct {
    const char* flags;
    const char* says;
  } cases[] = {
      {" --squared-relu --swiglu", "--squared-relu and --swiglu were both given"},
      {" --no-position-embedding", "--no-position-embedding is deprecated, use "
                                   "--position-embedding-type"},
      {" --no-position-embedding --position-embedding-type none",
       "--no-position-embedding is deprecated"},
      {" --padded-vocab-size 8", "--padded-vocab-size 8 is smaller than the tokenizer's"},
      {" --padded-vocab-size 0", "--padded-vocab-size 0 must be > 0"},
  };
  for (const auto& c : cases) {
    const RunResult r = run(base + c.flags);
    EXPECT_NE(r.exit_code, 0) << c.flags;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.flags << "\n" << r.output;
  }
  const RunResult tp = run(mpirun(2) + " train" + data + tiny_model_flags() +
                           " --train-iters 1 --lr-warmup-iters 0 --tensor-model-parallel-size 2"
                           " --padded-vocab-size 71");
  EXPECT_NE(tp.exit_code, 0);
  EXPECT_NE(tp.output.find("--padded-vocab-size 71 is not divisible by "
                           "--tensor-model-parallel-size 2"),
            std::string::npos)
      << tp.output;
  // Accepted with rope, by either spelling; the old ones are in the help.
  EXPECT_EQ(run(base + " --no-position-embedding --position-embedding-type rope").exit_code, 0);
  const RunResult help = run(megatron() + " train --help");
  for (const char* flag : {"--use-rotary-position-embeddings", "--no-position-embedding",
                           "--apply-layernorm-1p", "--squared-relu", "--padded-vocab-size"})
    EXPECT_NE(help.output.find(flag), std::string::npos) << flag;
}

}  // namespace arch_flags_test
}  // namespace mt::test
