// A small character-level checkpoint for the decoding tests of the public API
// (megatron::Generator, Scorer, DecodingSession), trained once per process by
// megatron::Trainer on a few sentences (a DataSource) into rank 0's directory (every rank runs it:
// DP over the world).
#pragma once
#include <mpi.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "megatron/data_source.h"
#include "megatron/trainer.h"
#include "mpi_world.h"
#include "temp_dir.h"

namespace mt::test {

constexpr int64_t kDecodingContext = 32;  // the checkpoint's --seq-length

// The vocabulary: space, '.', then 'a'..'z' (ids 0, 1, 2..27).
inline int32_t char_id(char c) { return c == ' ' ? 0 : c == '.' ? 1 : int32_t(c - 'a' + 2); }

// Windows of a few sentences repeated, in the vocabulary's ids.
class SentenceSamples final : public megatron::DataSource {
 public:
  int64_t size() const override { return 64; }
  void sample(int64_t index, int64_t seq_length, int32_t* tokens) const override {
    static const std::string text = "the cat sees the river. a dog likes the garden. my friend "
                                    "finds a red apple. the queen helps her brother. ";
    for (int64_t i = 0; i <= seq_length; ++i)
      tokens[i] = char_id(text[size_t((index * 7 + i) % int64_t(text.size()))]);
  }
};

// The checkpoint directory (on every rank), trained on the first call: a
// 2-layer GPT over a char vocabulary of lowercase letters, space and '.'
// (no end of document, so every generation runs to its length).
inline const std::string& decoding_checkpoint() {
  static TempDir dir;
  static const std::string ckpt = [] {
    const std::string root = rank0_path(dir.file(""));
    const std::string vocab = root + "/vocab.json";
    if (world_rank() == 0) {
      std::ofstream out(vocab);
      out << "[\" \", \".\"";
      for (char c = 'a'; c <= 'z'; ++c) out << ", \"" << c << "\"";
      out << "]";
    }
    MPI_Barrier(MPI_COMM_WORLD);
    megatron::Trainer t({"--vocab-file", vocab, "--num-layers", "2",
                         "--hidden-size", "32", "--ffn-hidden-size", "64",
                         "--num-attention-heads", "4", "--seq-length",
                         std::to_string(kDecodingContext), "--micro-batch-size", "2",
                         "--global-batch-size", "4", "--train-iters", "10", "--lr", "1e-2",
                         "--eval-interval", "0", "--peak-tflops", "1", "--log-interval", "10",
                         "--seed", "1234", "--save", root + "/ckpt"});
    t.set_train_data(std::make_shared<SentenceSamples>());
    t.run();
    return root + "/ckpt";
  }();
  return ckpt;
}

}  // namespace mt::test
