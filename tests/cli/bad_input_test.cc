// The bad-input list of DEVELOPERS.md: each case must end with a clear
// one-line error naming the value (checked by a substring), a non-zero exit,
// and — where a checkpoint is involved — no lost data.
#include <chrono>
#include <filesystem>

#include "bad_input_util.h"

namespace mt::test {
namespace bad_input_test {

class BadInput : public BadInputFixture {};

TEST_F(BadInput, FlagsAndLayout) {
  const BadInputCase cases[] = {
      {"misspelled flag", train(" --num-layer 3"), "--num-layer"},
      {"missing --train-iters", " train" + data, "--train-iters"},
      {"TP does not divide world", train(" --tensor-model-parallel-size 2"), "world size 1"},
      {"global batch misfit", train(" --global-batch-size 10"), "--global-batch-size 10"},
      {"heads do not divide hidden", train(" --num-attention-heads 5"), "--num-attention-heads 5"},
      {"sequence beyond positions", train(" --max-position-embeddings 16"),
       "--max-position-embeddings 16"},
      {"unknown decay style", train(" --lr-decay-style cosinus"), "cosinus"},
      {"min-lr above lr", train(" --min-lr 1"), "--min-lr"},
      {"unknown tokenizer", train(" --tokenizer-type GPT2BPETokenizer"), "GPT2BPETokenizer"},
      {"dropout of 1", train(" --hidden-dropout 1"), "--hidden-dropout"},
      {"missing config file", train(" --config {dir}nope.toml"), "nope.toml"},
      {"PP does not divide world", train(" --pipeline-model-parallel-size 2"), "PP(2)"},
      {"virtual stages without PP", train(" --num-layers-per-virtual-pipeline-stage 1"),
       "--num-layers-per-virtual-pipeline-stage needs"},
      {"full recompute without a method", train(" --recompute-granularity full"),
       "needs --recompute-method"},
      {"recompute method with selective",
       train(" --recompute-granularity selective --recompute-method block"),
       "--recompute-method block needs"},
  };
  for (const BadInputCase& c : cases) expect_fails(c);
}

TEST_F(BadInput, DataFiles) {
  const BadInputCase missing{"missing dataset",
                             " train --data-path {dir}nope_text_document --vocab-file "
                             "{dir}corpus_vocab.json" + tiny_model_flags() + " --train-iters 8",
                             "nope_text_document.idx"};
  expect_fails(missing);
  const BadInputCase vocab{"missing vocabulary", train(" --vocab-file {dir}nope.json"), "nope.json"};
  expect_fails(vocab);
  // Token ids beyond the vocabulary: the data has 30-odd distinct characters.
  const BadInputCase ids{"token id out of range",
                         train(" --tokenizer-type NullTokenizer --vocab-size 10"), "token id"};
  expect_fails(ids);
  // A corrupt .bin: one id beyond the vocabulary, in the last token. It fails
  // at start-up (before iteration 1), naming the file, place, id and vocabulary.
  {
    const std::string bin = dir.file("corpus_text_document.bin");
    const std::string saved = bin + ".good";
    std::filesystem::copy_file(bin, saved);
    std::fstream f(bin, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-2, std::ios::end);
    f.write("\xff\x7f", 2);  // uint16 id 32767
    f.close();
    const BadInputCase bad{"corrupt .bin", train(""), "token id 32767 in sequence"};
    expect_fails(bad);
    const RunResult r = run(megatron() + train(""));
    EXPECT_NE(r.output.find("corpus_text_document.bin"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("is outside the vocabulary of size"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("iteration"), std::string::npos) << "failed late:\n" << r.output;
    std::filesystem::rename(saved, bin);
  }
  // A truncated index.
  const std::string idx = dir.file("corpus_text_document.idx");
  std::filesystem::resize_file(idx, std::filesystem::file_size(idx) - 9);
  const BadInputCase trunc{"truncated .idx", train(""), "corpus_text_document.idx"};
  expect_fails(trunc);
  const BadInputCase pre{"preprocess of a missing file",
                         " preprocess --input {dir}absent.txt --output-prefix {dir}x", "absent.txt"};
  expect_fails(pre);
  write_text(dir.file("bad.txt"), "ok text\n\n\xff\xfe broken utf-8\n");
  const BadInputCase utf{"invalid UTF-8", " preprocess --input {dir}bad.txt --output-prefix {dir}x",
                         "bad.txt"};
  expect_fails(utf);
  write_text(dir.file("bad.jsonl"), "{\"text\": \"ok\"}\n{\"text\": \"caf\xe9\"}\n");
  const BadInputCase utf_jsonl{"invalid UTF-8 in .jsonl",
                               " preprocess --input {dir}bad.jsonl --output-prefix {dir}x",
                               "bad.jsonl line 2: invalid UTF-8 at byte offset 28 (byte 0xE9)"};
  expect_fails(utf_jsonl);
}

TEST_F(BadInput, Checkpoints) {
  const RunResult ok = run(megatron() + train(" --save " + dir.file("ckpt")));
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  const BadInputCase other{"load into another model", train(" --hidden-size 64 --load {dir}ckpt"),
                           "--load"};
  expect_fails(other);
  const BadInputCase none{"generate without a checkpoint",
                          " generate --load {dir}empty --prompt hi", "no checkpoint in"};
  expect_fails(none);
  // A tracker holding a NUL: shown escaped (a raw NUL cut the printed line
  // before its fix), with the iteration to write; nothing is changed.
  const std::string tracker = dir.file("ckpt/latest_checkpointed_iteration.txt");
  write_text(tracker, std::string("\0", 1));
  const BadInputCase nul{"tracker holding a NUL", train(" --train-iters 12 --load {dir}ckpt"),
                         "holds '\\x00', not an iteration number or 'release'; fix: write the "
                         "iteration to resume from into it, e.g. `echo 8 > "};
  expect_fails(nul);
  const BadInputCase nul_gen{"generate with a tracker holding a NUL",
                             " generate --load {dir}ckpt --prompt hi", "`echo 8 > "};
  expect_fails(nul_gen);
  EXPECT_EQ(read_text(tracker), std::string("\0", 1));
  EXPECT_TRUE(exists(dir.file("ckpt/iter_0000008/meta.json")));
  write_text(tracker, "8\n");
  const std::string model = dir.file("ckpt/iter_0000008/mp_rank_00_000/model.safetensors");
  std::filesystem::resize_file(model, std::filesystem::file_size(model) / 2);
  const BadInputCase corrupt{"truncated checkpoint", train(" --train-iters 12 --load {dir}ckpt"),
                             "model.safetensors"};
  expect_fails(corrupt);
  const BadInputCase gen{"generate from a truncated checkpoint",
                         " generate --load {dir}ckpt --prompt hi", "model.safetensors"};
  expect_fails(gen);
}

TEST(BadInputMpi, EveryRankReportsAMisfitAndTheJobEnds) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(50));
  const RunResult r =
      run("timeout 60 mpirun --oversubscribe -n 2 " + std::string(MT_BINARY) + " train" + data +
          tiny_model_flags() + " --train-iters 8 --global-batch-size 6");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, 124) << "job hung\n" << r.output;
  EXPECT_NE(r.output.find("--global-batch-size 6"), std::string::npos) << r.output;
}

TEST(BadInputMpi, HeadsNotDivisibleByTensorParallelSize) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(50));
  const RunResult r = run("timeout 60 mpirun --oversubscribe -n 2 " + std::string(MT_BINARY) +
                          " train" + data + tiny_model_flags() +
                          " --train-iters 8 --tensor-model-parallel-size 2 --num-attention-heads 1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, 124) << "job hung\n" << r.output;
  EXPECT_NE(r.output.find("--num-attention-heads 1 is not divisible by TP 2"), std::string::npos)
      << r.output;
}

// One rank fails (its data file is missing) while the other goes on into the
// first collective: the failing rank's MPI_Abort must end the whole job with
// its message, quickly, instead of leaving the other rank waiting. Both ranks
// get the same arguments (different ones are refused at start-up:
// same_args_test.cc): a relative --data-path, and rank 1 starts in a
// directory without the data (mpirun's -wdir per app context).
TEST(BadInputMpi, ARankThatFailsBringsDownTheJob) {
  TempDir dir;
  prepare_data(dir, synthetic_corpus(50));
  std::filesystem::create_directories(dir.file("empty"));
  const std::string flags = " train" + tiny_model_flags() + " --train-iters 8 --eval-interval 0" +
                            " --vocab-file " + dir.file("corpus_vocab.json") +
                            " --data-path corpus_text_document";
  const auto t0 = std::chrono::steady_clock::now();
  const RunResult r = run("timeout 60 mpirun --oversubscribe -n 1 -wdir " + dir.file("") + " " +
                          std::string(MT_BINARY) + flags + " : -n 1 -wdir " + dir.file("empty") +
                          " " + std::string(MT_BINARY) + flags);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, 124) << "job hung\n" << r.output;
  EXPECT_LT(secs, 30.0) << r.output;
  EXPECT_NE(r.output.find("[rank 1] error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("corpus_text_document.idx"), std::string::npos) << r.output;
}

}  // namespace bad_input_test
}  // namespace mt::test
