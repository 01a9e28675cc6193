// Megatron-LM's three example training scripts run to the end as they are:
// examples/gpt3/train_gpt3_175b_distributed.sh,
// examples/mixtral/train_mixtral_8x7b_distributed.sh and
// examples/llama/train_llama3_8b_h100_fp8.sh. Every flag each passes to
// pretrain_gpt.py is passed here verbatim, in its order, except:
// - sizes shrunk: layers, hidden, ffn, heads, query groups, kv-channels,
//   experts, seq length, max-position-embeddings, global batch, the step batch
//   schedule's thresholds and batches, train-iters / train-samples, the
//   lr-decay and warm-up lengths, eval-interval, eval-iters, save-interval,
//   log-interval (each run: 2 layers, hidden 64, seq 64, 3-4 iterations);
// - paths replaced: data (the synthetic corpus preprocessed with each
//   script's tokenizer), tokenizer (GPT-2's files in data/gpt2; a 96-piece
//   SentencePiece model standing in for Mixtral's tokenizer.model; a byte-level
//   BPE tokenizer.json standing in for Llama 3's Hugging Face folder), the
//   checkpoint, TensorBoard and data-cache folders (a temp dir);
// - parallel degrees reduced to 2 ranks: GPT-3 TP 8, PP 16 -> TP 1, PP 2;
//   Mixtral PP 4, EP 8 -> PP 1, EP 2; Llama 3 keeps its TP 1, CP 1 (DP 2);
// - the llama script's real-data branch (--mock-data is another issue's), with
//   its unquoted expansion as bash makes it: "--split '99,1,0'" is two words,
//   the quotes inside the value;
// - the 175B script's --global-batch-size 1536 left out: it passes
//   --step-batch-size-schedule too, and Megatron-LM refuses both together
//   ("Cannot specify both --step-batch-size-schedule and --global-batch-size",
//   arguments.py); its missing --tokenizer-type is GPT2BPETokenizer here (a
//   merge file is only GPT-2 BPE's; Megatron-LM's tokenizer builder refuses
//   none);
// - added: --log-json (the losses checked here) and --peak-tflops 1 (skips
//   the 12-second start-up matmul measurement, the MFU denominator).
// The llama script with its fp8 block ends non-zero with one line naming fp8.
#include <cmath>
#include <sstream>

#include "cli_test_util.h"

namespace mt::test {
namespace megatron_examples_test {

namespace fs = std::filesystem;

// A byte-level BPE tokenizer.json (GPT-2's byte-to-unicode alphabet, no
// merges, <|end_of_text|> as Llama 3's end of document): 257 ids.
nlohmann::json byte_level_tokenizer() {
  std::vector<int> bytes;
  for (int b = '!'; b <= '~'; ++b) bytes.push_back(b);
  for (int b = 0xA1; b <= 0xAC; ++b) bytes.push_back(b);
  for (int b = 0xAE; b <= 0xFF; ++b) bytes.push_back(b);
  std::vector<int> chars = bytes;
  for (int b = 0, extra = 0; b < 256; ++b)
    if (std::find(bytes.begin(), bytes.end(), b) == bytes.end()) {
      bytes.push_back(b);
      chars.push_back(256 + extra++);
    }
  nlohmann::json vocab = nlohmann::json::object();
  for (size_t i = 0; i < chars.size(); ++i) {
    const int c = chars[i];
    std::string utf8 = c < 0x80 ? std::string(1, char(c))
                                : std::string{char(0xC0 | (c >> 6)), char(0x80 | (c & 0x3F))};
    vocab[utf8] = int(i);
  }
  const nlohmann::json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  return {{"version", "1.0"},
          {"added_tokens",
           {{{"id", 256}, {"content", "<|end_of_text|>"}, {"single_word", false},
             {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", true}}}},
          {"normalizer", nullptr},
          {"pre_tokenizer", byte_level},
          {"post_processor", nullptr},
          {"decoder", byte_level},
          {"model",
           {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
            {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
            {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
}

class MegatronExamples : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    write_text(dir_->file("corpus.txt"), synthetic_corpus(200));
    fs::create_directories(dir_->file("hf"));
    write_text(dir_->file("hf/tokenizer.json"), byte_level_tokenizer().dump());
    write_text(dir_->file("spm_corpus.txt"), synthetic_corpus(80));
    spm_ok_ = spm_train(dir_->file("spm_corpus.txt"), dir_->file("sp"), 96);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  // Preprocesses the corpus with `tokenizer` into <name>_text_document.
  std::string dataset(const std::string& name, const std::string& tokenizer) {
    const std::string prefix = dir_->file(name);
    if (exists(prefix + "_text_document.bin")) return prefix + "_text_document";
    const RunResult r = run(megatron() + " preprocess --input " + dir_->file("corpus.txt") +
                            " --output-prefix " + prefix + tokenizer + " --append-eod");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return prefix + "_text_document";
  }
  // Runs `flags` on 2 ranks; the run's finite losses, one per iteration.
  std::vector<double> train(const std::string& name, const std::string& flags) {
    const std::string log = dir_->file(name + ".json");
    const std::string cmd =
        mpirun(2) + " train" + flags + " --log-json " + log + " --peak-tflops 1";
    const RunResult r = run(cmd);
    EXPECT_EQ(r.exit_code, 0) << name << "\n" << cmd << "\n" << r.output;
    std::vector<double> losses;
    for (const auto& [it, j] : read_log_json(log).train) losses.push_back(j.at("loss").get<double>());
    for (double l : losses) EXPECT_TRUE(std::isfinite(l) && l > 0) << name << "\n" << r.output;
    return losses;
  }
  std::string file(const std::string& name) const { return dir_->file(name); }

  static TempDir* dir_;
  static bool spm_ok_;
};
TempDir* MegatronExamples::dir_ = nullptr;
bool MegatronExamples::spm_ok_ = false;

TEST_F(MegatronExamples, Gpt3_175B) {
  const std::string g = std::string(MT_SOURCE_DIR) + "/data/gpt2/";
  ASSERT_TRUE(exists(g + "gpt2-vocab.json") && exists(g + "gpt2-merges.txt"))
      << "GPT-2 files absent (" << g << "); the ctest fixture fetch_gpt2_tokenizer runs "
      << "scripts/fetch_gpt2_tokenizer.sh";
  const std::string tok = " --vocab-file " + g + "gpt2-vocab.json --merge-file " + g + "gpt2-merges.txt";
  const std::string data = dataset("gpt", " --tokenizer-type GPT2BPETokenizer" + tok);
  const std::string ck = file("gpt_ckpt");
  // Thresholds in tokens: 128 / seq 64 = sample 2, 512 / 64 = sample 8.
  const std::vector<double> losses = train(
      "gpt",
      // GPT_MODEL_ARGS
      " --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64"
      " --max-position-embeddings 64 --attention-backend auto"
      // TRAINING_ARGS
      " --micro-batch-size 1 --step-batch-size-schedule \"0:2 128:4 0.512K:6\""
      " --train-iters 4 --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95"
      " --init-method-std 0.006 --clip-grad 1.0 --fp16 --lr 6.0e-5 --lr-decay-style cosine"
      " --min-lr 6.0e-6 --lr-warmup-fraction .001 --lr-decay-iters 3"
      // MODEL_PARALLEL_ARGS
      " --tensor-model-parallel-size 1 --pipeline-model-parallel-size 2"
      // DATA_ARGS
      " --data-path " + data + tok + " --split 949,50,1"
      // EVAL_AND_LOGGING_ARGS
      " --log-interval 1 --save-interval 4 --eval-interval 2 --save " + ck + " --load " + ck +
      " --eval-iters 1 --tensorboard-dir " + file("gpt_tb"));
  ASSERT_EQ(losses.size(), 4u);
  const JsonLogLines l = read_log_json(file("gpt.json"));
  std::vector<int64_t> batches;
  for (const auto& [it, j] : l.train) batches.push_back(j.at("global_batch_size").get<int64_t>());
  EXPECT_EQ(batches, (std::vector<int64_t>{2, 4, 4, 6}));  // consumed 0, 2, 6, 10
  EXPECT_EQ(l.eval.size(), 2u);
  EXPECT_TRUE(exists(ck + "/latest_checkpointed_iteration.txt"));
}

TEST_F(MegatronExamples, Mixtral8x7B) {
  ASSERT_TRUE(spm_ok_) << "spm_train failed or is missing (Debian package sentencepiece; "
                          "scripts/install_deps.sh installs it)";
  const std::string model = file("sp.model");
  const std::string data = dataset("sp", " --tokenizer-type Llama2Tokenizer --tokenizer-model " + model);
  const std::string ck = file("mixtral_ckpt");
  const std::vector<double> losses = train(
      "mixtral",
      // MODEL_ARGS
      " --use-mcore-models --disable-bias-linear --seq-length 64 --max-position-embeddings 256"
      " --num-layers 2 --hidden-size 64 --ffn-hidden-size 224 --num-attention-heads 4"
      " --init-method-std 0.01 --attention-dropout 0.0 --hidden-dropout 0.0"
      " --normalization RMSNorm --position-embedding-type rope --swiglu"
      " --untie-embeddings-and-output-weights --group-query-attention --num-query-groups 2"
      " --no-masked-softmax-fusion --no-position-embedding --rotary-base 1000000"
      // MOE_ARGS
      " --num-experts 4 --moe-router-topk 2 --moe-router-load-balancing-type aux_loss"
      " --moe-aux-loss-coeff 1e-2 --moe-grouped-gemm --moe-token-dispatcher-type alltoall"
      " --overlap-param-gather --overlap-grad-reduce"
      // DATA_ARGS
      " --tokenizer-type Llama2Tokenizer --tokenizer-model " + model + " --data-path " + data +
      " --split 99990,8,2"
      // TRAINING_ARGS
      " --micro-batch-size 1 --global-batch-size 4 --lr 1e-4 --train-iters 3"
      " --lr-decay-iters 2 --lr-decay-style cosine --min-lr 1.0e-5 --weight-decay 0.1"
      " --lr-warmup-iters 1 --clip-grad 1.0 --bf16"
      // MODEL_PARALLEL_ARGS
      " --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1"
      " --expert-model-parallel-size 2 --use-distributed-optimizer --sequence-parallel"
      // LOGGING_ARGS
      " --log-interval 1 --save-interval 3 --eval-interval 2 --eval-iters 1 --save " + ck +
      " --load " + ck + " --tensorboard-dir " + ck + "/tensorboard --no-load-optim --no-load-rng");
  EXPECT_EQ(losses.size(), 3u);
  EXPECT_TRUE(exists(ck + "/latest_checkpointed_iteration.txt"));
}

// The llama script's flags; `dtype` where its DTYPE_ARGS expand.
std::string llama3_flags(const std::string& dir, const std::string& data,
                         const std::string& dtype) {
  const std::string ck = dir + "/llama_ckpt" + std::to_string(dtype.size());
  return
      // MODEL_ARGS
      " --use-mcore-models --num-layers 2 --hidden-size 64 --ffn-hidden-size 224"
      " --num-attention-heads 4 --group-query-attention --num-query-groups 2 --kv-channels 16"
      " --seq-length 64 --max-position-embeddings 64 --position-embedding-type rope"
      " --rotary-base 1000000 --rotary-percent 1.0 --attention-dropout 0.0 --hidden-dropout 0.0"
      " --swiglu --normalization RMSNorm --init-method-std 0.0134 --attention-backend fused"
      " --apply-layernorm-1p --untie-embeddings-and-output-weights --disable-bias-linear"
      // TRAINING_ARGS (with DDP_ARGS)
      " --micro-batch-size 1 --global-batch-size 4 --train-samples 12 --lr-decay-samples 8"
      " --lr-warmup-samples 4 --lr 0.00015 --min-lr 0.00001 --decoupled-lr 5.0e-4"
      " --decoupled-min-lr 4.5e-5 --lr-decay-style cosine --clip-grad 1.0 --weight-decay 0.1"
      " --adam-beta1 0.9 --adam-beta2 0.95 --bf16 --grad-reduce-in-bf16"
      " --cross-entropy-loss-fusion --calculate-per-token-loss --manual-gc"
      " --empty-unused-memory-level 1 --exit-duration-in-mins 235"
      " --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather" +
      dtype +
      // MODEL_PARALLEL_ARGS
      " --tensor-model-parallel-size 1 --context-parallel-size 1 --sequence-parallel"
      // DATA_ARGS_LIST (real data)
      " --data-path " + data + " --tokenizer-type HuggingFaceTokenizer --tokenizer-model " + dir +
      "/hf --data-cache-path " + dir + "/cache --split \"'99,1,0'\""
      " --no-create-attention-mask-in-dataloader --no-mmap-bin-files --num-workers 1"
      " --vocab-size 128256"
      // EVAL_AND_LOGGING_ARGS
      " --log-interval 1 --eval-iters 1 --eval-interval 2 --save-interval 3 --log-throughput"
      " --profile --profile-step-start 1 --profile-step-end 2 --ckpt-format torch_dist"
      " --distributed-timeout-minutes 60 --save " + ck + " --load " + ck +
      " --tensorboard-dir " + dir + "/llama_tb";
}

TEST_F(MegatronExamples, Llama3_8B_WithoutItsFp8BlockTrains) {
  const std::string data =
      dataset("hf", " --tokenizer-type HuggingFaceTokenizer --tokenizer-model " + file("hf"));
  const std::vector<double> losses = train("llama", llama3_flags(file(""), data, ""));
  EXPECT_EQ(losses.size(), 3u);  // 12 samples / 4
  // --eval-interval 2 and the end of training, as Megatron-LM.
  EXPECT_EQ(read_log_json(file("llama.json")).eval.size(), 2u);
}

TEST_F(MegatronExamples, Llama3_8B_Fp8IsRefusedInOneLine) {
  const std::string data =
      dataset("hf", " --tokenizer-type HuggingFaceTokenizer --tokenizer-model " + file("hf"));
  const RunResult r = run(
      mpirun(2) + " train" +
      llama3_flags(file(""), data,
                   " --fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max"
                   " --fp8-param-gather"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  int fp8_lines = 0;
  for (std::string line; std::getline(lines, line);)
    if (line.find("fp8") != std::string::npos) {
      ++fp8_lines;
      EXPECT_NE(line.find("error: --fp8-format: fp8 and fp4 number formats are not built"),
                std::string::npos) << line;
      EXPECT_NE(line.find("fix: train in --bf16"), std::string::npos) << line;
    }
  EXPECT_EQ(fp8_lines, 1) << r.output;
}

}  // namespace megatron_examples_test
}  // namespace mt::test
