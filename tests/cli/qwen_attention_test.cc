// The attention options of Qwen2/Qwen3 (--kv-channels: a head size apart
// from h/a; --qk-layernorm: norms over each head's q and k before RoPE;
// --add-qkv-bias: a QKV bias without the other biases) train equal to one
// rank under every layout: TP with and without sequence parallelism (the q/k
// norms' gradients are summed over TP in both: each rank sees only its
// heads), pipeline with full recompute, context parallelism (the ring), data
// parallelism with the distributed optimizer and Megatron-FSDP, MoE layers
// with expert parallelism, and bf16. A checkpoint records the options,
// generate samples the same text from it on one rank and on two TP ranks,
// `convert --saver hf` refuses it (no exporter for Qwen yet), and a resume
// with other options is refused naming the flag.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "layout_match_util.h"

namespace mt::test {
namespace qwen_attention_test {

// Qwen3-shaped (head size 16 with h 32 and 4 heads: a·d = 64 = 2h; q/k
// RMSNorms; 2 query groups; SwiGLU; untied) with Qwen2's QKV bias too, so
// that each run exercises every option. Micro-batch 2, global batch 8.
std::string qwen_flags(const char* norm = "RMSNorm") {
  return std::string(
             " --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32"
             " --micro-batch-size 2 --global-batch-size 8 --lr 3e-3 --min-lr 3e-4"
             " --lr-decay-style cosine --lr-warmup-iters 2 --weight-decay 0.1 --clip-grad 1.0"
             " --split 90,10,0 --peak-tflops 1 --log-interval 1"
             " --position-embedding-type rope --swiglu --ffn-hidden-size 64"
             " --group-query-attention --num-query-groups 2"
             " --disable-bias-linear --untie-embeddings-and-output-weights"
             " --hidden-dropout 0.1 --attention-dropout 0.1"
             " --train-iters 6 --eval-interval 3 --eval-iters 1"
             " --kv-channels 16 --qk-layernorm --add-qkv-bias --normalization ") +
         norm;
}

// fp32: round-off only (measured: within 6e-9). Tighter than the 1e-5 the
// layouts must meet: q/k norm gradients left unsummed over TP move the loss
// by only ~6e-6 in six iterations, and this must tell that apart.
constexpr double kTol = 1e-7;

TEST(QwenAttention, TensorParallelMatchesOneRank) {
  expect_layouts_match_one_rank(
      qwen_flags(),
      {{"tp2", 2, " --tensor-model-parallel-size 2"},
       {"tp2_sp", 2, " --tensor-model-parallel-size 2 --sequence-parallel"},
       // the TP sum before ZeRO's reduce-scatter; TP x SP x CP together
       {"tp2_dp2_zero", 4, " --tensor-model-parallel-size 2 --use-distributed-optimizer"},
       {"tp2_sp_cp2", 4,
        " --tensor-model-parallel-size 2 --sequence-parallel --context-parallel-size 2"}},
      kTol, {"loss"}, "Qwen attention, TP");
  // LayerNorm q/k norms (a weight and a bias each, both summed over TP).
  expect_layouts_match_one_rank(qwen_flags("LayerNorm"),
                                {{"tp2_layernorm", 2, " --tensor-model-parallel-size 2"}}, kTol,
                                {"loss"}, "Qwen attention with LayerNorm, TP");
}

TEST(QwenAttention, PipelineContextAndDataParallelMatchOneRank) {
  expect_layouts_match_one_rank(
      qwen_flags(),
      {{"pp2_recompute", 2,
        " --pipeline-model-parallel-size 2 --recompute-granularity full"
        " --recompute-method uniform --recompute-num-layers 1"},
       {"cp2", 2, " --context-parallel-size 2"},
       {"dp2_zero", 2, " --use-distributed-optimizer"},
       {"dp2_fsdp", 2,
        " --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params"}},
      kTol, {"loss"}, "Qwen attention, PP / CP / DP");
}

// MoE layers behind the options' attention, with experts over EP and the
// rest over TP; and bf16 (the tolerance of the other bf16 layout tests:
// a differently summed fp32 value may round to the other bf16 neighbour).
TEST(QwenAttention, MoeAndBf16MatchOneRank) {
  expect_layouts_match_one_rank(
      qwen_flags() + " --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 48",
      {{"tp2_sp_ep2", 2,
        " --tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 2"
        " --moe-token-dispatcher-type alltoall"}},
      kTol, {"loss"}, "Qwen attention with MoE");
  expect_layouts_match_one_rank(
      qwen_flags() + " --bf16",
      {{"tp2_sp_bf16", 2, " --tensor-model-parallel-size 2 --sequence-parallel"},
       {"cp2_bf16", 2, " --context-parallel-size 2"}},
      1e-4, {"loss"}, "Qwen attention, bf16");
}

TEST(QwenAttention, CheckpointRecordsTheOptions) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(100));
  const std::string save = dir.file("ckpt");
  std::string flags = qwen_flags();
  flags.replace(flags.find("--train-iters 6"), 15, "--train-iters 3");
  flags.replace(flags.find("--eval-interval 3"), 17, "--eval-interval 0");
  const RunResult r = run(megatron() + " train" + data + flags + " --save " + save);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json meta =
      nlohmann::json::parse(read_text(save + "/iter_0000003/meta.json"));
  const nlohmann::json& model = meta.at("args").at("model");
  EXPECT_EQ(model.at("kv_channels"), 16);
  EXPECT_EQ(model.at("qk_layernorm"), true);
  EXPECT_EQ(model.at("add_qkv_bias"), true);
  // Seeded sampling from it (the KV cache holds normalized, rotated keys of
  // the query groups): the same text on one rank and on two TP ranks.
  const std::string err = dir.file("gen_stderr.txt");
  const std::string gen = " generate --load " + save +
                          " --prompt 'the ' --max-new-tokens 40 --temperature 1 --seed 3";
  const RunResult g1 = run_stdout(megatron() + gen, err);
  ASSERT_EQ(g1.exit_code, 0) << g1.output << read_text(err);
  const RunResult g2 = run_stdout(mpirun(2) + gen + " --tensor-model-parallel-size 2", err);
  ASSERT_EQ(g2.exit_code, 0) << g2.output << read_text(err);
  EXPECT_EQ(g1.output.rfind("the ", 0), 0u) << g1.output;
  EXPECT_EQ(g1.output, g2.output);
  // No Hugging Face family has the q/k norms and a QKV bias together (Qwen3
  // has the norms, Qwen2 the bias): exporting is refused by name, before
  // anything is written.
  const RunResult hf = run(megatron() + " convert --model-type GPT --loader megatron --saver hf"
                           " --load-dir " + save + " --save-dir " + dir.file("hf"));
  EXPECT_NE(hf.exit_code, 0) << hf.output;
  EXPECT_NE(hf.output.find("nearest is qwen3"), std::string::npos) << hf.output;
  EXPECT_NE(hf.output.find("--add-qkv-bias with --qk-layernorm"), std::string::npos) << hf.output;
  EXPECT_FALSE(exists(dir.file("hf") + "/config.json"));
  // A resume without --qk-layernorm is another model.
  std::string other = flags;
  other.replace(other.find(" --qk-layernorm"), 15, "");
  other.replace(other.find("--train-iters 3"), 15, "--train-iters 5");
  const RunResult bad = run(megatron() + " train" + data + other + " --load " + save);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--qk-layernorm"), std::string::npos) << bad.output;
}

}  // namespace qwen_attention_test
}  // namespace mt::test
