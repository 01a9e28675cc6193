// megatron/scoring.h — the loss of a checkpoint on given text, per document,
// without training: `megatron score` as a library call.
//
// A Scorer loads a checkpoint (a --save directory of `megatron train`, or one
// `megatron convert` wrote) with its own tokenizer, split over the MPI world
// as `megatron score` splits it (TP ranks share each layer, EP ranks split an
// MoE model's experts: the world is lcm(TP, EP) ranks), and scores documents:
// each is tokenized with the checkpoint's tokenizer and cut as Megatron's GPT
// dataset cuts a sample, windows of the model's context in predictions, each
// starting from the previous window's last token (the model never sees past its
// context). A token's log-probability is over the real vocabulary (padding
// rows excluded, as after `convert` to Hugging Face), in double. The numbers
// are `megatron score`'s JSON lines, bit for bit.
//
// A Scorer is built from options, or from the command's words (its flags and
// `--config`, parsed and refused as the binary does: megatron/flags.h), and
// run() is the command.
//
// MPI: scoring initialises MPI unless the program has, and the Scorer
// finalises it when destroyed (so a process holds one Scorer unless it
// initialises MPI itself). An error on any rank ends the whole job (one line,
// MPI_Abort).
//
//   megatron::Scorer s({.load = "ckpt"});
//   const megatron::Scores r = s.score({"The cat sees the river.", "A dog."});
//   std::printf("loss %.4f over %lld tokens\n", r.loss, (long long)r.tokens);
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "megatron/flags.h"

namespace megatron {

// `megatron score`'s flags as fields (same names, same defaults).
struct ScoreOptions {
  std::string load;                // --load: the checkpoint directory
  std::string input;               // --input: .txt (documents separated by blank lines) or .jsonl
  std::string json_key = "text";   // --json-keys: JSONL, the key holding each document's text
  bool append_eod = false;         // --append-eod: end each document with the end of document
  int tensor_parallel = 1;         // --tensor-model-parallel-size
  int expert_parallel = 1;         // --expert-model-parallel-size
  bool skip_memory_check = false;  // --skip-memory-check
};

// One document's score.
struct DocumentScore {
  std::vector<int32_t> ids;        // its tokens (and the end of document with append_eod)
  std::vector<double> log_probs;   // of ids[1..], each token's given those before (in its window)
  int64_t tokens = 0;              // tokens predicted: log_probs.size()
  double sum_log_prob = 0;
  double loss = 0;                 // mean negative log-likelihood, nats (NaN: no token predicted)
  double ppl = 0;                  // exp(loss)
};

// Every document's, in order, and the total over all predicted tokens.
struct Scores {
  std::vector<DocumentScore> documents;
  int64_t tokens = 0;
  double sum_log_prob = 0;
  double loss = 0;                 // NaN when no token was predicted (documents of < 2 tokens)
  double ppl = 0;
};

class Scorer {
 public:
  // Throws std::invalid_argument when options.load is empty.
  explicit Scorer(const ScoreOptions& options);
  // `flags`: the words after `megatron score`. Throws FlagError (FlagHelp for --help).
  explicit Scorer(const std::vector<std::string>& flags);
  ~Scorer();
  Scorer(const Scorer&) = delete;
  Scorer& operator=(const Scorer&) = delete;

  const ScoreOptions& options() const;

  // Collective over the MPI world, once (the key/value cache is sized by the
  // longest document's window): every rank checks that the others score the
  // same, loads the checkpoint and scores; every rank gets the result. Rank 0
  // says the cache's size on stderr. score() reads options().input as
  // `megatron score` does (a directory, an empty file or one of blank lines
  // only is an error naming it); score(documents) scores the given texts. A
  // second call throws std::logic_error; any error ends the whole job.
  Scores score();
  Scores score(const std::vector<std::string>& documents);

  // `megatron score`: score(), then on rank 0 one JSON line per document and a
  // total (on stdout or to --output-json; --log-probs adds the ids and
  // log-probabilities) and a summary on stderr. Returns what the command exits
  // with (0).
  int run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace megatron
