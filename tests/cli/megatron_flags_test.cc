// Megatron-LM's flags as its example scripts pass them: the GPU kernel,
// fusion, checkpoint back-end and data-loader choices are accepted (with
// Megatron's values) and listed in one start-up note, the run's numbers
// unchanged; a value Megatron would refuse is refused; fp8/fp4, Weights &
// Biases and PyTorch FSDP2 are refused by name with what to use instead; any
// other unknown flag is named with the nearest flag the command has.
#include "bad_input_util.h"

namespace mt::test {
namespace megatron_flags_test {

class MegatronFlags : public BadInputFixture {};

TEST_F(MegatronFlags, KernelAndBackendChoicesAreAcceptedInOneNoteWithTheSameLosses) {
  const std::string inert =
      " --use-mcore-models --attention-backend auto --transformer-impl transformer_engine"
      " --use-flash-attn --no-masked-softmax-fusion --no-bias-gelu-fusion --no-bias-swiglu-fusion"
      " --no-bias-dropout-fusion --no-rope-fusion --cross-entropy-loss-fusion"
      " --cross-entropy-fusion-impl te --no-gradient-accumulation-fusion --no-persist-layer-norm"
      " --tp-comm-overlap --overlap-p2p-communication --defer-embedding-wgrad-compute"
      " --ckpt-format torch_dist --use-dist-ckpt --ckpt-fully-parallel-save"
      " --ckpt-fully-parallel-load --ckpt-assume-constant-structure --dist-ckpt-strictness log_all"
      " --no-load-rng --no-save-rng --use-cpu-initialization --manual-gc --manual-gc-interval 10"
      " --empty-unused-memory-level 1 --num-workers 2 --no-mmap-bin-files"
      " --no-create-attention-mask-in-dataloader --num-distributed-optimizer-instances 1";
  const RunResult plain = run(megatron() + train(" --train-iters 3 --lr-warmup-iters 1 --log-json " + dir.file("a.json")));
  const RunResult with = run(megatron() + train(" --train-iters 3 --lr-warmup-iters 1 --log-json " + dir.file("b.json") + inert));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(with.exit_code, 0) << with.output;
  size_t notes = 0;
  for (size_t p = 0; (p = with.output.find("accepted without effect here", p)) != std::string::npos; ++p)
    ++notes;
  EXPECT_EQ(notes, 1u) << with.output;
  for (const char* f : {"--attention-backend auto", "--use-mcore-models", "--ckpt-format torch_dist",
                        "--num-distributed-optimizer-instances 1"})
    EXPECT_NE(with.output.find(f), std::string::npos) << f << "\n" << with.output;
  EXPECT_EQ(plain.output.find("accepted without effect"), std::string::npos);
  const JsonLogLines a = read_log_json(dir.file("a.json")), b = read_log_json(dir.file("b.json"));
  ASSERT_EQ(a.train.size(), 3u);
  for (const auto& [it, j] : a.train) EXPECT_EQ(j.at("loss"), b.train.at(it).at("loss")) << it;
}

// Issue 39's list, each flag alone added to one small run of 1 iteration:
// accepted, and named in the one start-up note of flags without effect here.
TEST_F(MegatronFlags, EachListedFlagAloneIsAcceptedAndNamedInTheNote) {
  const char* inert[] = {
      "--use-mcore-models", "--attention-backend flash", "--use-flash-attn",
      "--transformer-impl local", "--no-masked-softmax-fusion", "--no-bias-gelu-fusion",
      "--no-bias-swiglu-fusion", "--no-bias-dropout-fusion", "--no-rope-fusion",
      "--cross-entropy-loss-fusion", "--no-gradient-accumulation-fusion",
      "--no-persist-layer-norm", "--tp-comm-overlap", "--overlap-p2p-communication",
      "--defer-embedding-wgrad-compute", "--num-distributed-optimizer-instances 1",
      "--num-workers 1", "--no-mmap-bin-files", "--no-create-attention-mask-in-dataloader",
      "--tiktoken-pattern v2", "--distribute-saved-activations", "--use-cpu-initialization",
      "--manual-gc", "--manual-gc-interval 5", "--empty-unused-memory-level 2", "--no-save-rng",
      "--no-load-rng", "--ckpt-format torch_dist", "--ckpt-format torch",
      "--ckpt-format fsdp_dtensor", "--use-dist-ckpt", "--ckpt-fully-parallel-save",
      "--ckpt-fully-parallel-load", "--ckpt-assume-constant-structure",
      "--dist-ckpt-strictness assume_ok_unexpected"};
  for (const char* flag : inert) {
    const RunResult r = run(megatron() + train(std::string(" --train-iters 1 --lr-warmup-iters 0 ") + flag));
    EXPECT_EQ(r.exit_code, 0) << flag << "\n" << r.output;
    const size_t note = r.output.find("note: accepted without effect here: ");
    ASSERT_NE(note, std::string::npos) << flag << "\n" << r.output;
    const std::string line = r.output.substr(note, r.output.find('\n', note) - note);
    EXPECT_NE(line.find(flag), std::string::npos) << flag << "\n" << line;
  }
  // Layers moved between stages, not a note: accepted at PP 1 (nothing to split).
  for (const char* flag : {"--account-for-embedding-in-pipeline-split",
                           "--account-for-loss-in-pipeline-split"}) {
    const RunResult r = run(megatron() + train(std::string(" --train-iters 1 --lr-warmup-iters 0 ") + flag));
    EXPECT_EQ(r.exit_code, 0) << flag << "\n" << r.output;
  }
}

// As Megatron-LM: the embedding and the loss count as layers of the first
// and last stage, (L + 1 + 1) / PP per stage; a count PP does not divide is
// refused. 3 layers do not split over PP 2; 3 + 1 (loss) do: 2 on the first
// stage, 1 beside the loss.
TEST_F(MegatronFlags, AccountingTheEmbeddingAndLossMovesLayersBetweenStages) {
  const std::string pp2 = " --train-iters 1 --lr-warmup-iters 0 --num-layers 3"
                          " --pipeline-model-parallel-size 2";
  const RunResult plain = run(mpirun(2) + train(pp2));
  EXPECT_NE(plain.exit_code, 0);
  EXPECT_NE(plain.output.find("--num-layers 3 is not divisible by --pipeline-model-parallel-size 2"),
            std::string::npos) << plain.output;
  const RunResult loss = run(mpirun(2) + train(pp2 + " --account-for-loss-in-pipeline-split"));
  EXPECT_EQ(loss.exit_code, 0) << loss.output;
  const RunResult both = run(mpirun(2) + train(pp2 + " --account-for-loss-in-pipeline-split"
                                               " --account-for-embedding-in-pipeline-split"));
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.output.find("--num-layers 3 + 1 (embedding) + 1 (loss) = 5 is not divisible by "
                             "--pipeline-model-parallel-size 2"),
            std::string::npos) << both.output;
}

TEST_F(MegatronFlags, ValuesMegatronRefusesAndFlagsNotBuiltAreRefusedByName) {
  const BadInputCase cases[] = {
      {"backend", train(" --attention-backend flash2"), "--attention-backend flash2 is not one of "
                                                        "Megatron-LM's choices (flash, fused"},
      {"impl", train(" --transformer-impl te"), "--transformer-impl te is not one of"},
      {"instances", train(" --num-distributed-optimizer-instances 2"),
       "several optimizer instances across DP are not built"},
      {"workers", train(" --num-workers -1"), "--num-workers -1 is not a whole number"},
      {"fp8", train(" --fp8-format hybrid --fp8-amax-history-len 1024"),
       "--fp8-format: fp8 and fp4 number formats are not built"},
      {"fp4", train(" --fp4-format e2m1"), "fix: train in --bf16"},
      {"wandb", train(" --wandb-project p --wandb-exp-name e"),
       "--wandb-project: Weights & Biases logging is not built; fix: log with --tensorboard-dir"},
      {"fsdp2", train(" --use-torch-fsdp2"), "fix: --use-megatron-fsdp"},
      {"typo", train(" --global-batch-sise 8"),
       "unknown flag --global-batch-sise; the nearest flag of `megatron train` is "
       "--global-batch-size; see `megatron train --help`"},
      {"far", train(" --zzzz"), "unknown flag --zzzz; see `megatron train --help`"},
  };
  for (const BadInputCase& c : cases) {
    expect_fails(c);
    const RunResult r = run(megatron() + c.args);
    EXPECT_EQ(r.exit_code, c.name == std::string("backend") || c.name == std::string("impl") ||
                                   c.name == std::string("instances") ||
                                   c.name == std::string("workers")
                               ? 1
                               : 2)
        << c.name << "\n" << r.output;
  }
}

}  // namespace megatron_flags_test
}  // namespace mt::test
