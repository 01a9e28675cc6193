// Trains a GPT whose MLPs are a block megatron.cpp does not have (the
// gated-GELU MLP of gated_gelu_mlp.h), through the installed package's
// public headers only. Every argument is a `megatron train` flag, except
//   --losses-out FILE  where rank 0 writes each iteration's loss, one a line;
//   --step-by-step     drive the Trainer: setup(), step() to --train-iters and
//                      (with --save) save(), instead of run();
//   --pattern-data     train on this program's own samples (PatternSamples, a
//                      megatron::DataSource) instead of --mock-data / --data-path.
//
//   ./custom_block --mock-data --tokenizer-type NullTokenizer --vocab-size 127 \
//       --make-vocab-size-divisible-by 64 \
//       --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 \
//       --micro-batch-size 2 --global-batch-size 8 --lr 1e-3 --train-iters 10
//   mpirun -n 4 ./custom_block ... --tensor-model-parallel-size 2 \
//       --sequence-parallel --use-distributed-optimizer
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <megatron/block.h>
#include <megatron/data_source.h>
#include <megatron/trainer.h>

#include "gated_gelu_mlp.h"

namespace {

// Counting sequences modulo 16: sample i runs from i mod 16 upwards in steps
// of 1 + i mod 3 (ids 0..15 of the NullTokenizer's 127). A model first learns
// that only 16 ids occur, then the next from the last; every rank serves the same.
class PatternSamples final : public megatron::DataSource {
 public:
  int64_t size() const override { return int64_t(1) << 20; }
  void sample(int64_t index, int64_t seq_length, int32_t* tokens) const override {
    const int64_t start = index % 16, stride = 1 + index % 3;
    for (int64_t j = 0; j <= seq_length; ++j) tokens[j] = int32_t((start + j * stride) % 16);
  }
};

}  // namespace

int main(int argc, char** argv) {
  // Every rank registers the block before the model is built; --mlp-kind picks it.
  megatron::register_mlp_block("gated_gelu", std::make_shared<custom_block::GatedGeluMlp>());
  std::vector<std::string> flags = {"--mlp-kind", "gated_gelu"};
  std::string losses_out;
  bool step_by_step = false, pattern_data = false, save = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--losses-out" && i + 1 < argc) {
      losses_out = argv[++i];
    } else if (arg == "--step-by-step") {
      step_by_step = true;
    } else if (arg == "--pattern-data") {
      pattern_data = true;
    } else {
      save |= arg == "--save";
      flags.push_back(arg);
    }
  }
  try {
    megatron::Trainer trainer(flags);
    std::FILE* out = nullptr;
    trainer.on_step([&](const megatron::StepLog& s) {
      if (s.world_rank != 0 || losses_out.empty()) return;
      if (out == nullptr) out = std::fopen(losses_out.c_str(), "w");
      if (out != nullptr) std::fprintf(out, "%lld %.17g\n", static_cast<long long>(s.iteration),
                                       s.loss);
    });
    if (pattern_data) trainer.set_train_data(std::make_shared<PatternSamples>());
    int rc = 0;
    if (step_by_step) {
      trainer.setup();
      while (trainer.iteration() < trainer.train_iters()) trainer.step();
      if (save) trainer.save();
    } else {
      rc = trainer.run();
    }
    if (out != nullptr) std::fclose(out);
    return rc;
  } catch (const megatron::FlagError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
