// A small character-level checkpoint for the decoding tests of the public API
// (megatron::Generator, Scorer, DecodingSession), trained once per process by
// megatron::Trainer on mock data over rank 0's directory (every rank runs it:
// DP over the world), and the MPI helpers those tests share.
#pragma once
#include <mpi.h>

#include <fstream>
#include <string>
#include <vector>

#include "megatron/trainer.h"
#include "temp_dir.h"

namespace mt::test {

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// Rank 0's path `mine`, on every rank (the ranks share one machine).
inline std::string rank0_path(std::string path) {
  int n = int(path.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  path.resize(size_t(n));
  MPI_Bcast(path.data(), n, MPI_CHAR, 0, MPI_COMM_WORLD);
  return path;
}

constexpr int64_t kDecodingContext = 32;  // the checkpoint's --seq-length

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
    megatron::Trainer t({"--mock-data", "--vocab-file", vocab, "--num-layers", "2",
                         "--hidden-size", "32", "--ffn-hidden-size", "64",
                         "--num-attention-heads", "4", "--seq-length",
                         std::to_string(kDecodingContext), "--micro-batch-size", "2",
                         "--global-batch-size", "4", "--train-iters", "3", "--lr", "1e-2",
                         "--eval-interval", "0", "--peak-tflops", "1", "--log-interval", "10",
                         "--seed", "1234", "--save", root + "/ckpt"});
    t.run();
    return root + "/ckpt";
  }();
  return ckpt;
}

}  // namespace mt::test
