// `megatron train` end to end: learning, exact resume, signals, NaN stop,
// training on Megatron-LM's own dataset files.
#include <cmath>
#include <map>

#include "cli_test_util.h"

namespace mt::test {
namespace train_cli_test {

TEST(TrainCli, ValidationLossFallsWellBelowUnigramEntropy) {
  TempDir dir;
  const std::string text = synthetic_corpus(600);
  std::map<char, double> counts;
  for (char c : text) counts[c] += 1;
  double entropy = 0;  // nats per character
  for (auto& [c, n] : counts) entropy -= n / double(text.size()) * std::log(n / double(text.size()));
  const std::string data = prepare_data(dir, text);
  const RunResult r = run(megatron() + " train" + data + tiny_model_flags() +
                          " --train-iters 300 --eval-interval 100 --eval-iters 4 --log-interval 100"
                          " --hidden-dropout 0 --attention-dropout 0 --log-json " +
                          dir.file("log.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const JsonLogLines log = read_log_json(dir.file("log.json"));
  ASSERT_GE(log.eval.size(), 3u) << r.output;
  const double val = log.eval.back().at("val_loss").get<double>();
  EXPECT_LT(val, 0.6 * entropy) << "unigram entropy " << entropy << "\n" << r.output;
  EXPECT_NEAR(log.eval.back().at("val_ppl").get<double>(), std::exp(val), 1e-6 * std::exp(val));
  for (const char* key : {"iteration", "consumed_samples", "loss", "lr", "grad_norm",
                          "ms_per_iter", "tokens_per_s", "tflops", "mfu"})
    EXPECT_TRUE(log.train.at(300).contains(key)) << key;
  EXPECT_EQ(log.train.at(300).at("consumed_samples").get<int64_t>(), 300 * 8);
}

TEST(TrainCli, StopSaveAndResumeGivesIdenticalLosses) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(200));
  const std::string common = megatron() + " train" + data + tiny_model_flags() +
                             " --train-iters 20 --hidden-dropout 0.1 --attention-dropout 0.1"
                             " --eval-interval 0";
  RunResult straight = run(common + " --log-json " + dir.file("a.json"));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  RunResult first = run(common + " --exit-interval 10 --save " + dir.file("ckpt") +
                        " --log-json " + dir.file("b.json"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  ASSERT_TRUE(exists(dir.file("ckpt/iter_0000010/mp_rank_00_000/model.safetensors")));
  ASSERT_TRUE(exists(dir.file("ckpt/iter_0000010/mp_rank_00_000/optim_dp_000.safetensors")));
  RunResult second = run(common + " --load " + dir.file("ckpt") + " --save " + dir.file("ckpt") +
                         " --log-json " + dir.file("b.json"));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  const JsonLogLines a = read_log_json(dir.file("a.json")), b = read_log_json(dir.file("b.json"));
  ASSERT_EQ(a.train.size(), 20u);
  ASSERT_EQ(b.train.size(), 20u);
  for (int64_t it = 1; it <= 20; ++it) {
    EXPECT_EQ(a.train.at(it).at("loss").get<double>(), b.train.at(it).at("loss").get<double>())
        << "iteration " << it;
    EXPECT_EQ(a.train.at(it).at("grad_norm").get<double>(),
              b.train.at(it).at("grad_norm").get<double>())
        << "iteration " << it;
  }
  std::ifstream latest(dir.file("ckpt/latest_checkpointed_iteration.txt"));
  int64_t it = 0;
  latest >> it;
  EXPECT_EQ(it, 20);
}

TEST(TrainCli, SigtermSavesAndExitsZero) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(100));
  const RunResult r = run("timeout --preserve-status -s TERM 5 " + megatron() + " train" + data +
                          tiny_model_flags() + " --train-iters 1000000 --eval-interval 0 --save " +
                          dir.file("ckpt"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(exists(dir.file("ckpt/latest_checkpointed_iteration.txt"))) << r.output;
  std::ifstream latest(dir.file("ckpt/latest_checkpointed_iteration.txt"));
  int64_t it = 0;
  latest >> it;
  EXPECT_GT(it, 0);
  EXPECT_LT(it, 1000000);
  EXPECT_TRUE(exists(dir.file("ckpt/iter_" + std::string(7 - std::to_string(it).size(), '0') +
                              std::to_string(it))));
}

TEST(TrainCli, NanLossStopsAndKeepsTheLastGoodCheckpoint) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(100));
  const RunResult r = run(megatron() + " train" + data + tiny_model_flags() +
                          " --train-iters 50 --lr 1e30 --min-lr 1e30 --lr-warmup-iters 0"
                          " --lr-decay-style constant --clip-grad 0 --eval-interval 0"
                          " --save-interval 1 --save " + dir.file("ckpt"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("is not finite"), std::string::npos) << r.output;
  std::ifstream latest(dir.file("ckpt/latest_checkpointed_iteration.txt"));
  int64_t it = -1;
  latest >> it;
  ASSERT_GE(it, 1) << r.output;
  // The failing iteration is it + 1: nothing of it was saved.
  EXPECT_NE(r.output.find("iteration " + std::to_string(it + 1) + ":"), std::string::npos)
      << r.output;
  EXPECT_FALSE(exists(dir.file("ckpt/iter_" + std::string(7 - std::to_string(it + 1).size(), '0') +
                               std::to_string(it + 1))));
}

TEST(TrainCli, TrainsOnMegatronLmWrittenDatasetWithNullTokenizer) {
  const std::string prefix =
      std::string(MT_SHARED_DATA) + "/megatron-indexed/tinyshakespeare_text_document";
  if (!exists(prefix + ".idx"))
    GTEST_SKIP() << "shared data absent (" << prefix << ".idx); this test needs ../shared/data";
  TempDir dir;
  const RunResult r = run(megatron() + " train --data-path " + prefix +
                          " --tokenizer-type NullTokenizer --vocab-size 65" + tiny_model_flags() +
                          " --train-iters 30 --eval-interval 0 --log-json " + dir.file("log.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const JsonLogLines log = read_log_json(dir.file("log.json"));
  ASSERT_EQ(log.train.size(), 30u);
  // Small init: the first loss is that of a uniform guess over the padded vocabulary (128).
  EXPECT_NEAR(log.train.at(1).at("loss").get<double>(), std::log(128.0), 0.1);
  EXPECT_LT(log.train.at(30).at("loss").get<double>(), log.train.at(1).at("loss").get<double>() - 0.5);
}

TEST(TrainCli, GenerateFromTrainedCheckpointStreamsText) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(200));
  RunResult t = run(megatron() + " train" + data + tiny_model_flags() +
                    " --train-iters 200 --eval-interval 0 --log-interval 100 --save " +
                    dir.file("ckpt"));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const std::string gen = megatron() + " generate --load " + dir.file("ckpt") +
                          " --prompt 'The cat' --max-new-tokens 80 --seed 3 --top-k 5";
  const std::string err = dir.file("gen_stderr.txt");
  RunResult g1 = run_stdout(gen, err), g2 = run_stdout(gen, err);
  ASSERT_EQ(g1.exit_code, 0) << g1.output << read_text(err);
  EXPECT_EQ(g1.output, g2.output);  // seeded
  EXPECT_EQ(g1.output.rfind("The cat", 0), 0u) << g1.output;
  // Context longer than the 32 positions: the decoder slides and keeps going.
  RunResult g3 = run(megatron() + " generate --load " + dir.file("ckpt") +
                     " --prompt 'A dog' --max-new-tokens 100 --temperature 0");
  ASSERT_EQ(g3.exit_code, 0) << g3.output;
  EXPECT_GT(g3.output.size(), 100u);
}


TEST(TrainCli, ConfigFileStandsInForFlags) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(100));
  write_text(dir.file("run.toml"),
             "num-layers = 2\nhidden-size = 32\nnum-attention-heads = 4\nseq-length = 32\n"
             "micro-batch-size = 4\nglobal-batch-size = 8\nlr = 3e-3\nmin-lr = 3e-4\n"
             "lr-decay-style = \"cosine\"\nlr-warmup-iters = 5\nweight-decay = 0.1\n"
             "clip-grad = 1.0\nsplit = \"90,10,0\"\npeak-tflops = 1\nlog-interval = 1\n");
  const RunResult flags = run(megatron() + " train" + data + tiny_model_flags() +
                              " --train-iters 6 --eval-interval 0 --log-json " + dir.file("a.json"));
  ASSERT_EQ(flags.exit_code, 0) << flags.output;
  const RunResult file = run(megatron() + " train --config " + dir.file("run.toml") + data +
                             " --train-iters 6 --eval-interval 0 --log-json " + dir.file("b.json"));
  ASSERT_EQ(file.exit_code, 0) << file.output;
  const JsonLogLines a = read_log_json(dir.file("a.json")), b = read_log_json(dir.file("b.json"));
  ASSERT_EQ(a.train.size(), 6u);
  for (int64_t it = 1; it <= 6; ++it)
    EXPECT_EQ(a.train.at(it).at("loss").get<double>(), b.train.at(it).at("loss").get<double>());
}

}  // namespace train_cli_test
}  // namespace mt::test
