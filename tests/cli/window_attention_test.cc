// Sliding-window attention (Megatron's --window-size L,0): a Llama-shaped
// model trains equal to one rank (fp32 within 1e-5, bf16 within the other
// bf16 layout tests' 1e-4) under TP2 with SP, PP2, CP2 with the window
// shorter than a chunk and longer than one (the ring skips or cuts chunk
// pairs at global positions), DP2 with the distributed optimizer. The window
// changes the losses; the checkpoint records it, a resume with another is
// refused naming the flag; generate past the window (a ring KV cache) gives
// the same text on one rank and two TP ranks; bad values and the flags not
// built are refused by name.
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "layout_match_util.h"

namespace mt::test {
namespace window_attention_test {

// seq 32: at CP2 four chunks of 8 positions.
std::string window_flags(const std::string& window) {
  return " --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32"
         " --max-position-embeddings 96"
         " --micro-batch-size 2 --global-batch-size 8 --lr 3e-3 --min-lr 3e-4"
         " --lr-decay-style cosine --lr-warmup-iters 2 --weight-decay 0.1 --clip-grad 1.0"
         " --split 90,10,0 --peak-tflops 1 --log-interval 1"
         " --normalization RMSNorm --position-embedding-type rope --swiglu --ffn-hidden-size 64"
         " --group-query-attention --num-query-groups 2 --disable-bias-linear"
         " --untie-embeddings-and-output-weights --hidden-dropout 0.1 --attention-dropout 0.1"
         " --train-iters 6 --eval-interval 3 --eval-iters 1" +
         (window.empty() ? std::string() : " --window-size '" + window + "'");
}

constexpr double kTol = 1e-5;

TEST(WindowAttention, TensorAndPipelineParallelMatchOneRank) {
  expect_layouts_match_one_rank(
      window_flags("5,0"),
      {{"tp2_sp", 2, " --tensor-model-parallel-size 2 --sequence-parallel"},
       {"pp2", 2, " --pipeline-model-parallel-size 2"},
       {"dp2_zero", 2, " --use-distributed-optimizer"}},
      kTol, {"loss"}, "window 5, TP / PP / DP");
}

// Chunks of 8: a window of 5 leaves whole chunk pairs out (skipped) and cuts
// others; 20 spans more than two chunks.
TEST(WindowAttention, ContextParallelMatchesOneRankWithShortAndLongWindows) {
  for (const char* window : {"5,0", "20,0"})
    expect_layouts_match_one_rank(window_flags(window),
                                  {{"cp2", 2, " --context-parallel-size 2"},
                                   {"tp2_sp_cp2", 4,
                                    " --tensor-model-parallel-size 2 --sequence-parallel"
                                    " --context-parallel-size 2"}},
                                  kTol, {"loss"}, window);
}

TEST(WindowAttention, Bf16MatchesOneRank) {
  expect_layouts_match_one_rank(
      window_flags("5,0") + " --bf16",
      {{"tp2_sp_bf16", 2, " --tensor-model-parallel-size 2 --sequence-parallel"},
       {"cp2_bf16", 2, " --context-parallel-size 2"}},
      1e-4, {"loss"}, "window 5, bf16");
}

TEST(WindowAttention, CheckpointGenerateAndResume) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(100));
  auto flags = [&](const std::string& window) {
    std::string f = window_flags(window);
    f.replace(f.find("--train-iters 6"), 15, "--train-iters 3");
    f.replace(f.find("--eval-interval 3"), 17, "--eval-interval 0");
    return f;
  };
  const std::string save = dir.file("ckpt");
  const RunResult r = run(megatron() + " train" + data + flags("(5, 0)") + " --save " + save +
                          " --log-json " + dir.file("w.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json meta = nlohmann::json::parse(read_text(save + "/iter_0000003/meta.json"));
  EXPECT_EQ(meta.at("args").at("model").at("window_size"), "5,0");  // one spelling
  // The window matters: the same run without it has other losses.
  const RunResult full = run(megatron() + " train" + data + flags("") + " --log-json " +
                             dir.file("full.json"));
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const double lw = read_log_json(dir.file("w.json")).train.at(3).at("loss").get<double>();
  const double lf = read_log_json(dir.file("full.json")).train.at(3).at("loss").get<double>();
  EXPECT_GT(rel(lw, lf), 1e-4) << lw << " vs " << lf;
  // 60 new tokens: far past the window of 6 (the ring cache) and past --seq-length.
  const std::string err = dir.file("gen_stderr.txt");
  const std::string gen = " generate --load " + save +
                          " --prompt 'the ' --max-new-tokens 60 --temperature 1 --seed 3";
  const RunResult g1 = run_stdout(megatron() + gen, err);
  ASSERT_EQ(g1.exit_code, 0) << g1.output << read_text(err);
  const RunResult g2 = run_stdout(mpirun(2) + gen + " --tensor-model-parallel-size 2", err);
  ASSERT_EQ(g2.exit_code, 0) << g2.output << read_text(err);
  EXPECT_EQ(g1.output.rfind("the ", 0), 0u) << g1.output;
  EXPECT_EQ(g1.output, g2.output);
  // Resumes with another window, or none, are another model.
  for (const auto& [window, fix] : {std::pair<std::string, std::string>{"7,0", "pass --window-size 5,0"},
                                    {"", "pass --window-size 5,0"}}) {
    std::string other = flags(window);
    other.replace(other.find("--train-iters 3"), 15, "--train-iters 5");
    const RunResult bad = run(megatron() + " train" + data + other + " --load " + save);
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.output.find(fix), std::string::npos) << bad.output;
  }
}

TEST(WindowAttention, BadValuesAndFlagsNotBuiltAreRefusedByName) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(40));
  for (const auto& [value, says] :
       {std::pair<std::string, std::string>{"4,2", "R 2 is not 0, but the decoder is causal"},
        {"-1,-1", "R -1 is not 0"},
        {"abc", "is not two integers L,R"},
        {"-2,0", "L -2 must be >= 0"},
        {"4", "is not two integers L,R"}}) {
    const RunResult r = run(megatron() + " train" + data + window_flags("") +
                            " --window-size=" + value);
    EXPECT_NE(r.exit_code, 0) << value;
    EXPECT_NE(r.output.find("--window-size"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << value << ": " << r.output;
  }
  const RunResult skip = run(megatron() + " train" + data + window_flags("4,0") +
                             " --window-attn-skip-freq 2");
  EXPECT_NE(skip.exit_code, 0);
  EXPECT_NE(skip.output.find("--window-attn-skip-freq: full-attention layers"), std::string::npos)
      << skip.output;
}

}  // namespace window_attention_test
}  // namespace mt::test
