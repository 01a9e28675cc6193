// Trains a GPT whose MLPs are a block megatron.cpp does not have (the
// gated-GELU MLP of gated_gelu_mlp.h), through the installed package's
// public headers only. Every argument is a `megatron train` flag, except
// --losses-out FILE: where rank 0 writes each iteration's loss, one a line.
//
//   ./custom_block --mock-data --tokenizer-type NullTokenizer --vocab-size 127 \
//       --make-vocab-size-divisible-by 64 \
//       --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 \
//       --micro-batch-size 2 --global-batch-size 8 --lr 1e-3 --train-iters 10
//   mpirun -n 4 ./custom_block ... --tensor-model-parallel-size 2 \
//       --sequence-parallel --use-distributed-optimizer
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <megatron/block.h>
#include <megatron/trainer.h>

#include "gated_gelu_mlp.h"

int main(int argc, char** argv) {
  // Every rank registers the block before the model is built; --mlp-kind picks it.
  megatron::register_mlp_block("gated_gelu", std::make_shared<custom_block::GatedGeluMlp>());
  std::vector<std::string> flags = {"--mlp-kind", "gated_gelu"};
  std::string losses_out;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--losses-out" && i + 1 < argc)
      losses_out = argv[++i];
    else
      flags.push_back(arg);
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
    const int rc = trainer.run();
    if (out != nullptr) std::fclose(out);
    return rc;
  } catch (const megatron::FlagError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
