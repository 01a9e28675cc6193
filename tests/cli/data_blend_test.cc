// Megatron's dataset blends from the command line (issue 27, item 3):
// `--data-path 0.3 A 0.7 B` trains on both, with the same losses on one rank
// and under DP, TP and PP (the blend is the same at any layout); a config
// file's list works and the command line's list wins over it; a repeated
// --data-path is refused (argparse would keep the last silently);
// --train/valid-data-path blend whole datasets; --data-cache-path writes the
// blend index once, reuses it, and rebuilds a damaged one, all with the same
// losses.
#include <filesystem>

#include "cli_test_util.h"

namespace mt::test {
namespace data_blend_test {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class DataBlend : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string a = synthetic_corpus(120, 5), b = synthetic_corpus(90, 9);
    write_text(dir.file("all.txt"), a + "\n" + b);  // one character vocabulary for both
    write_text(dir.file("a.txt"), a);
    write_text(dir.file("b.txt"), b);
    for (const char* name : {"all", "a", "b"}) {
      const std::string vocab = std::string(name) == "all" ? "" : " --vocab-file " + dir.file("all_vocab.json");
      const RunResult r = run(megatron() + " preprocess --input " + dir.file(std::string(name) + ".txt") +
                              " --output-prefix " + dir.file(name) + vocab);
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    A = dir.file("a_text_document");
    B = dir.file("b_text_document");
  }
  // A train command on `n` ranks (1: no mpirun) with `data` flags.
  std::string train(int n, const std::string& data, const std::string& more = "") const {
    return (n == 1 ? megatron() : mpirun(n)) + " train" + data + " --vocab-file " +
           dir.file("all_vocab.json") +
           " --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32"
           " --micro-batch-size 2 --global-batch-size 8 --lr 3e-3 --train-iters 6"
           " --log-interval 1 --eval-interval 3 --eval-iters 2 --peak-tflops 1" + more;
  }
  TempDir dir;
  std::string A, B;
};

TEST_F(DataBlend, WeightedBlendTrainsAlikeAtEveryLayout) {
  const std::string blend = " --data-path 0.3 " + A + " 0.7 " + B + " --split 90,10,0";
  const RunResult one = run(train(1, blend, " --log-json " + dir.file("one.json")));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  // ceil(48 x 0.3) + ceil(48 x 0.7) samples, each dataset named with its share.
  EXPECT_TRUE(has(one.output, "data: train blend of 2 datasets (--data-path), 49 samples: " + A +
                                  " weight 0.3, 15 of")) << one.output;
  EXPECT_TRUE(has(one.output, B + " weight 0.7, 34 of")) << one.output;
  const JsonLogLines ref = read_log_json(dir.file("one.json"));
  ASSERT_EQ(ref.train.size(), 6u);
  ASSERT_EQ(ref.eval.size(), 2u);
  const std::pair<const char*, std::string> layouts[] = {
      {"dp2", ""},
      {"tp2", " --tensor-model-parallel-size 2 --make-vocab-size-divisible-by 64"},
      {"pp2", " --pipeline-model-parallel-size 2"}};
  for (const auto& [tag, flags] : layouts) {
    const std::string json = dir.file(std::string(tag) + ".json");
    const RunResult r = run(train(2, blend, flags + " --log-json " + json));
    ASSERT_EQ(r.exit_code, 0) << tag << "\n" << r.output;
    expect_same_losses(ref, read_log_json(json), tag, 1e-6);
  }
  // Not a run on A alone: the blend's batches differ.
  const RunResult a_only = run(train(1, " --data-path " + A + " --split 90,10,0",
                                     " --log-json " + dir.file("a.json")));
  ASSERT_EQ(a_only.exit_code, 0) << a_only.output;
  EXPECT_NE(read_log_json(dir.file("a.json")).train.at(2).at("loss").get<double>(),
            ref.train.at(2).at("loss").get<double>());
}

TEST_F(DataBlend, ConfigFileListAndARepeatedFlag) {
  const std::string blend = " --data-path 0.3 " + A + " 0.7 " + B;
  const RunResult flags = run(train(1, blend, " --log-json " + dir.file("flags.json")));
  ASSERT_EQ(flags.exit_code, 0) << flags.output;
  write_text(dir.file("run.toml"),
             "data-path = [\"0.3\", \"" + A + "\", \"0.7\", \"" + B + "\"]\n");
  const RunResult file = run(train(1, " --config " + dir.file("run.toml"),
                                   " --log-json " + dir.file("file.json")));
  ASSERT_EQ(file.exit_code, 0) << file.output;
  expect_same_losses(read_log_json(dir.file("flags.json")), read_log_json(dir.file("file.json")),
                     "config file", 0.0);
  // The command line's list replaces the file's (not a repeat).
  const RunResult over = run(train(1, " --config " + dir.file("run.toml") + " --data-path " + A));
  ASSERT_EQ(over.exit_code, 0) << over.output;
  EXPECT_FALSE(has(over.output, "blend of")) << over.output;
  const RunResult twice = run(train(1, " --data-path " + A + " --data-path " + B));
  EXPECT_NE(twice.exit_code, 0);
  EXPECT_TRUE(has(twice.output, "--data-path is given 2 times")) << twice.output;
  EXPECT_TRUE(has(twice.output, "fix:")) << twice.output;
}

TEST_F(DataBlend, PerSplitPathsBlendWholeDatasets) {
  const std::string per_split = " --train-data-path " + A + " " + B + " --valid-data-path " + B;
  const RunResult r = run(train(1, per_split, " --log-json " + dir.file("r.json")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "train blend of 2 datasets (--train-data-path), 48 samples"))
      << r.output;
  EXPECT_EQ(read_log_json(dir.file("r.json")).eval.size(), 2u);
  for (const std::string& bad : {per_split + " --split 90,10,0", per_split + " --data-path " + A,
                                 " --valid-data-path " + B}) {
    const RunResult e = run(train(1, bad));
    EXPECT_NE(e.exit_code, 0) << bad;
    EXPECT_TRUE(has(e.output, "fix:")) << e.output;
  }
}

TEST_F(DataBlend, CacheIsWrittenOnceReusedAndRebuiltWhenDamaged) {
  namespace fs = std::filesystem;
  const std::string cache = dir.file("cache");
  const std::string blend = " --data-path 1 " + A + " 3 " + B + " --data-cache-path " + cache;
  const RunResult first = run(train(1, blend, " --log-json " + dir.file("1.json")));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_TRUE(has(first.output, "built and saved to " + cache)) << first.output;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(cache)) files.push_back(e.path().string());
  ASSERT_EQ(files.size(), 2u) << "one index per blended split (train, valid)";
  const RunResult second = run(train(2, blend, " --log-json " + dir.file("2.json")));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_TRUE(has(second.output, "read from " + cache)) << second.output;
  EXPECT_FALSE(has(second.output, "built and saved")) << second.output;
  expect_same_losses(read_log_json(dir.file("1.json")), read_log_json(dir.file("2.json")),
                     "cached, DP2", 1e-6);
  // One flipped byte: rebuilt (said), the same losses.
  {
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-12, std::ios::end);
    f.put('\x7f');
  }
  const RunResult third = run(train(1, blend, " --log-json " + dir.file("3.json")));
  ASSERT_EQ(third.exit_code, 0) << third.output;
  EXPECT_TRUE(has(third.output, "(the file there was corrupt (CRC-32C ")) << third.output;
  expect_same_losses(read_log_json(dir.file("1.json")), read_log_json(dir.file("3.json")),
                     "rebuilt", 0.0);
}

}  // namespace data_blend_test
}  // namespace mt::test
