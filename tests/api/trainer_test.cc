// megatron::Trainer step by step (include/megatron/trainer.h) against its own
// run(), at 1 rank and under `mpirun -n 2` (DP2): setup() + N x step() gives
// run()'s losses bit for bit; evaluate() gives run()'s evaluation of the same
// weights; a save() resumed by --load continues with the uninterrupted losses;
// a DataSource serving the mock dataset's training samples gives the
// --mock-data run's losses (so it is read in the same sampler order and cut
// the same way over the DP ranks), and with --mock-data beside it evaluates on
// the flags' validation split; a token id out of the vocabulary ends the
// run with one line naming it.
#include <gtest/gtest.h>
#include <mpi.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset_builder.h"
#include "megatron/data_source.h"
#include "megatron/trainer.h"
#include "mpi_world.h"
#include "temp_dir.h"

namespace trainer_test {

constexpr int64_t kSeq = 32, kIters = 6, kGlobalBatch = 8, kVocab = 128;  // NullTokenizer 127 + eod

// A tiny GPT with dropout, evaluated on 2 batches of the mock validation split.
std::vector<std::string> flags(std::vector<std::string> extra = {}, bool mock = true) {
  std::vector<std::string> f = {
      "--tokenizer-type", "NullTokenizer", "--vocab-size", "127",
      "--make-vocab-size-divisible-by", "64", "--num-layers", "2", "--hidden-size", "32",
      "--ffn-hidden-size", "64", "--num-attention-heads", "4", "--seq-length",
      std::to_string(kSeq), "--micro-batch-size", "2", "--global-batch-size",
      std::to_string(kGlobalBatch), "--train-iters", std::to_string(kIters), "--lr", "1e-2",
      "--min-lr", "1e-3", "--lr-decay-style", "cosine", "--lr-warmup-iters", "2",
      "--weight-decay", "0.1", "--clip-grad", "1.0", "--hidden-dropout", "0.1",
      "--attention-dropout", "0.1", "--peak-tflops", "1", "--log-interval", "1",
      "--eval-interval", "100", "--eval-iters", "2", "--seed", "1234"};
  if (mock) f.push_back("--mock-data");
  f.insert(f.end(), extra.begin(), extra.end());
  return f;
}

struct Reference {
  std::vector<double> losses;  // per iteration
  double final_eval = 0;       // run()'s evaluation after the last iteration
};

// `megatron train` of flags() as the library runs it.
Reference run_whole() {
  Reference ref;
  megatron::Trainer t(flags());
  t.on_step([&](const megatron::StepLog& s) { ref.losses.push_back(s.loss); });
  t.on_eval([&](const megatron::EvalLog& e) { ref.final_eval = e.loss; });
  EXPECT_EQ(t.run(), 0);
  EXPECT_EQ(ref.losses.size(), size_t(kIters));
  return ref;
}

using mt::test::shared_dir;
using mt::test::world_rank;
using mt::test::world_size;

TEST(TrainerSteps, SetupAndStepsGiveRunsLossesBitForBit) {
  const Reference ref = run_whole();
  megatron::Trainer t(flags());
  std::vector<double> told;
  t.on_step([&](const megatron::StepLog& s) { told.push_back(s.loss); });
  t.setup();
  EXPECT_EQ(t.iteration(), 0);
  for (int64_t i = 0; i < kIters; ++i) {
    const megatron::StepLog s = t.step();
    EXPECT_EQ(s.iteration, i + 1);
    EXPECT_EQ(s.loss, ref.losses[size_t(i)]) << "iteration " << i + 1;
    EXPECT_EQ(s.world_rank, world_rank());
  }
  EXPECT_EQ(told, ref.losses);
  EXPECT_EQ(t.iteration(), kIters);
  // run()'s evaluation at the end is evaluate() of the same weights.
  const megatron::EvalLog e = t.evaluate();
  EXPECT_EQ(e.iteration, kIters);
  EXPECT_FALSE(e.test);
  EXPECT_EQ(e.loss, ref.final_eval);
  // The learning-rate schedule ends at --train-iters.
  EXPECT_THROW(t.step(), std::logic_error);
}

TEST(TrainerSteps, SaveThenLoadContinuesAsAnUninterruptedRun) {
  const Reference ref = run_whole();
  mt::test::TempDir tmp;
  const std::string dir = shared_dir(tmp) + "/ckpt";
  {
    megatron::Trainer t(flags({"--save", dir}));
    EXPECT_THROW(t.step(), std::logic_error);  // before setup()
    t.setup();
    for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(t.step().loss, ref.losses[size_t(i)]);
    // Evaluation changes nothing: twice the same, and the steps go on as run()'s.
    const double e1 = t.evaluate().loss, e2 = t.evaluate().loss;
    EXPECT_EQ(e1, e2);
    EXPECT_GT(e1, 0);
    t.save();
    std::ifstream tracker(dir + "/latest_checkpointed_iteration.txt");
    int64_t saved = -1;
    tracker >> saved;
    EXPECT_EQ(saved, 3);
    EXPECT_TRUE(std::filesystem::is_directory(dir + "/iter_0000003"));
    EXPECT_EQ(t.step().loss, ref.losses[3]);
  }
  megatron::Trainer resumed(flags({"--load", dir}));
  resumed.setup();
  EXPECT_EQ(resumed.iteration(), 3);
  EXPECT_THROW(resumed.save(), std::logic_error);  // no --save
  for (int64_t i = 3; i < kIters; ++i)
    EXPECT_EQ(resumed.step().loss, ref.losses[size_t(i)]) << "iteration " << i + 1;
  MPI_Barrier(MPI_COMM_WORLD);  // every rank is done with rank 0's directory
}

// The mock dataset's training split (as --mock-data builds it for flags()),
// served as the program's samples.
class MockSamples final : public megatron::DataSource {
 public:
  explicit MockSamples(int64_t samples, int32_t poison = -1) : poison_(poison) {
    mt::DatasetBuilderConfig c;
    c.mock = true;
    c.split = "";
    c.mock_vocab_size = kVocab;
    c.mock_eod = kVocab - 1;
    c.vocab_size = kVocab;
    c.seq_length = kSeq;
    c.seed = 1234;
    c.sizes = {samples, 0, 0};
    splits_ = mt::build_dataset_splits(c);
  }
  int64_t size() const override { return splits_.split[0]->size(); }
  void sample(int64_t index, int64_t seq_length, int32_t* tokens) const override {
    splits_.split[0]->read_sample(index, 0, seq_length + 1, tokens);
    if (poison_ >= 0 && index == 3) tokens[5] = poison_;
  }

 private:
  mt::DatasetSplits splits_;
  int32_t poison_;
};

TEST(TrainerSteps, DataSourceOfTheMockSamplesGivesTheMockDataRunsLosses) {
  const Reference ref = run_whole();
  // Only the program's samples: no data flag at all (no validation split).
  megatron::Trainer t(flags({}, /*mock=*/false));
  t.set_train_data(std::make_shared<MockSamples>(kIters * kGlobalBatch));
  t.setup();
  EXPECT_THROW(t.set_train_data(std::make_shared<MockSamples>(1)), std::logic_error);
  EXPECT_THROW(t.evaluate(), std::logic_error);
  for (int64_t i = 0; i < kIters; ++i)
    EXPECT_EQ(t.step().loss, ref.losses[size_t(i)]) << "iteration " << i + 1;
}

TEST(TrainerSteps, DataSourceWithMockDataTrainsOnTheSourceAndEvaluatesOnTheFlags) {
  const Reference ref = run_whole();
  megatron::Trainer t(flags());  // --mock-data: the validation split
  t.set_train_data(std::make_shared<MockSamples>(kIters * kGlobalBatch));
  t.setup();
  for (int64_t i = 0; i < kIters; ++i)
    EXPECT_EQ(t.step().loss, ref.losses[size_t(i)]) << "iteration " << i + 1;
  EXPECT_EQ(t.evaluate().loss, ref.final_eval);
}

TEST(TrainerSteps, DataSourceOfOtherSamplesGivesOtherLosses) {
  // The check that the equality above can fail: the same source shifted by
  // one global batch (the second iteration's samples first).
  struct Shifted final : megatron::DataSource {
    MockSamples inner{kIters * kGlobalBatch + kGlobalBatch};
    int64_t size() const override { return kIters * kGlobalBatch; }
    void sample(int64_t i, int64_t s, int32_t* t) const override {
      inner.sample(i + kGlobalBatch, s, t);
    }
  };
  const Reference ref = run_whole();
  megatron::Trainer t(flags({}, /*mock=*/false));
  t.set_train_data(std::make_shared<Shifted>());
  t.setup();
  EXPECT_NE(t.step().loss, ref.losses[0]);
}

TEST(TrainerStepsDeathTest, TokenOutOfTheVocabularyEndsTheRunNamingIt) {
  if (world_size() > 1) GTEST_SKIP() << "a death test forks one rank";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        megatron::Trainer t(flags({}, /*mock=*/false));
        t.set_train_data(std::make_shared<MockSamples>(kIters * kGlobalBatch, /*poison=*/999));
        t.setup();
        t.step();
      },
      ::testing::ExitedWithCode(1),
      "token id 999 at position 5 of sample 3 of the program's megatron::DataSource is outside "
      "the vocabulary of size 128");
}

}  // namespace trainer_test
