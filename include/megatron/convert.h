// megatron/convert.h — `megatron convert` as a library call: a Hugging Face
// folder <-> a megatron.cpp checkpoint directory (Megatron-LM's
// tools/checkpoint/convert.py, loader and saver in one).
//
//   hf -> megatron: a Hugging Face gpt2 / llama / mistral / mixtral / qwen /
//     deepseek folder (config.json, safetensors weights, tokenizer files)
//     becomes the release checkpoint <output>/release (tracker "release") at
//     the target TP / PP / EP sizes: a Trainer's --load fine-tunes it from
//     iteration 0, a DecodingSession decodes it.
//   megatron -> hf: any checkpoint (its tracker's iteration, any TP/PP) becomes
//     config.json, safetensors weights (fp32, or bf16) and the tokenizer files.
//
// Both stream one tensor at a time, write into a working folder renamed into
// place when complete (a failure never leaves a partial model), and refuse,
// before writing anything, what would not convert exactly. No MPI: a
// conversion runs in the calling process alone.
//
//   megatron::ConvertOptions o;
//   o.direction = megatron::ConvertDirection::kHfToMegatron;
//   o.input = "llama-hf";
//   o.output = "ckpt";
//   o.target_tensor_parallel_size = 2;
//   megatron::Converter(o).run();
//
// Or with `megatron convert`'s words (Megatron-LM's flags, --config FILE):
//   megatron::Converter({"--model-type", "GPT", "--loader", "hf", "--saver",
//                        "megatron", "--load-dir", "llama-hf", "--save-dir", "ckpt"}).run();
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "megatron/flags.h"

namespace megatron {

enum class ConvertDirection {
  kHfToMegatron,  // --loader hf --saver megatron
  kMegatronToHf,  // --loader megatron --saver hf
};

struct ConvertOptions {
  ConvertDirection direction = ConvertDirection::kHfToMegatron;
  std::string input;   // --load-dir: the folder read
  std::string output;  // --save-dir: the folder written (created if missing)
  // Write into an output folder that already holds checkpoints (megatron) or
  // a model (hf) (--overwrite-checkpoints).
  bool overwrite = false;

  // hf -> megatron only (the other direction refuses values other than these):
  int target_tensor_parallel_size = 1;    // --target-tensor-parallel-size
  int target_pipeline_parallel_size = 1;  // --target-pipeline-parallel-size (an even split)
  // --target-expert-parallel-size: 1 keeps every expert in each shard; N
  // writes the experts into N expert directories per stage, as an EP N run saves them.
  int target_expert_parallel_size = 1;
  // --make-vocab-size-divisible-by: the vocabulary padded to a multiple of this x TP.
  int64_t make_vocab_size_divisible_by = 128;

  // megatron -> hf only (the other direction refuses values other than these):
  bool bf16 = false;                 // --bf16: bf16 weights (round to nearest even), else fp32
  int64_t max_shard_size_mb = 5000;  // --max-shard-size-mb: the largest weight file (10^6 bytes)
};

class Converter {
 public:
  // A conversion as `options` say. Throws std::invalid_argument for an empty
  // input or output.
  explicit Converter(ConvertOptions options);
  // `flags`: the words after `megatron convert`. Throws FlagError (FlagHelp
  // for --help), as the binary refuses them.
  explicit Converter(const std::vector<std::string>& flags);
  // The same for a list written out, Converter({"--help"}) (which the options
  // would otherwise take too).
  explicit Converter(std::initializer_list<std::string> flags)
      : Converter(std::vector<std::string>(flags)) {}
  ~Converter();
  Converter(const Converter&) = delete;
  Converter& operator=(const Converter&) = delete;

  // The options (from the words: what the flags set; the direction is
  // meaningful when run() would accept --loader and --saver).
  const ConvertOptions& options() const;

  // Converts, printing progress and one summary line (with the peak RSS) to
  // stdout; returns what `megatron convert` exits with (0). Any error ends
  // the job as the binary does (one line on stderr, exit 1; MPI_Abort in a
  // multi-rank job): --model-type other than GPT, a --loader / --saver pair
  // not supported, an output that would replace the input, an option of the
  // other direction, an architecture or tensor that would not convert exactly.
  int run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace megatron
