// Tensor, sequence and data parallelism under mpirun equal one rank: the
// losses of every iteration (1e-7 relative) and the final weights gathered
// from the TP shards (1e-6), with dropout on: round-off only. The one-rank reference pads the
// vocabulary to the same size (Megatron pads to a multiple of 128·TP, so the
// TP runs use --make-vocab-size-divisible-by 128/TP).
#include <cmath>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "checkpoint_test_util.h"
#include "cli_test_util.h"

namespace mt::test {
namespace tensor_parallel_test {

struct Layout {
  int tp, dp;
  bool sp;
  const char* extra;
};

TEST(TensorParallel, LayoutsMatchOneRank) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(200));
  const std::string flags = " train" + data + tiny_model_flags() +
                            " --micro-batch-size 2 --global-batch-size 8 --train-iters 8"
                            " --hidden-dropout 0.1 --attention-dropout 0.1 --eval-interval 0";
  const RunResult one = run(megatron() + flags + " --save " + dir.file("ref") + " --log-json " +
                            dir.file("ref.json"));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const JsonLogLines ref = read_log_json(dir.file("ref.json"));
  SafetensorsReader ref_model(dir.file("ref/iter_0000008/mp_rank_00_000/model.safetensors"));
  const Layout layouts[] = {{2, 1, false, ""},
                            {2, 1, true, " --overlap-grad-reduce"},
                            {1, 2, false, " --overlap-grad-reduce --ddp-bucket-size 5000"},
                            {1, 4, false, ""},
                            {2, 2, true, " --overlap-grad-reduce --ddp-bucket-size 5000"},
                            {4, 1, true, ""}};
  for (const Layout& l : layouts) {
    const std::string tag = "tp" + std::to_string(l.tp) + "dp" + std::to_string(l.dp) +
                            (l.sp ? "sp" : "");
    const RunResult r =
        run(mpirun(l.tp * l.dp) + flags + " --tensor-model-parallel-size " + std::to_string(l.tp) +
            " --make-vocab-size-divisible-by " + std::to_string(128 / l.tp) +
            (l.sp ? " --sequence-parallel" : "") + l.extra + " --save " + dir.file(tag) +
            " --log-json " + dir.file(tag + ".json"));
    ASSERT_EQ(r.exit_code, 0) << tag << "\n" << r.output;
    const JsonLogLines got = read_log_json(dir.file(tag + ".json"));
    ASSERT_EQ(got.train.size(), ref.train.size()) << tag;
    for (const auto& [it, j] : ref.train) {
      const double a = j.at("loss").get<double>(), b = got.train.at(it).at("loss").get<double>();
      EXPECT_NEAR(b, a, 1e-7 * std::abs(a)) << tag << " iteration " << it;
    }
    for (const std::string& name : ref_model.names()) {
      std::vector<float> a(static_cast<size_t>(ref_model.info(name).numel()));
      ref_model.read_f32(name, a.data(), int64_t(a.size()));
      EXPECT_LT(rel_diff(a, gathered(dir.file(tag + "/iter_0000008"), name, l.tp, 1)),
                weight_tolerance(name))
          << tag << " " << name;
    }
  }
}

TEST(TensorParallel, CheckpointReshardsAcrossTpForResumeAndGenerate) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(200));
  const std::string flags = " train" + data + tiny_model_flags() +
                            " --micro-batch-size 2 --global-batch-size 8 --train-iters 12"
                            " --hidden-dropout 0 --attention-dropout 0 --eval-interval 0";
  // Continuing at TP=2 is the reference for resuming at TP=1.
  const RunResult a = run(mpirun(2) + flags + " --tensor-model-parallel-size 2 --sequence-parallel"
                          " --exit-interval 6 --save " + dir.file("c2"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const RunResult b = run(mpirun(2) + flags + " --tensor-model-parallel-size 2 --sequence-parallel"
                          " --load " + dir.file("c2") + " --log-json " + dir.file("tp2.json"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const RunResult c = run(megatron() + flags + " --load " + dir.file("c2") + " --log-json " +
                          dir.file("tp1.json"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  const JsonLogLines l2 = read_log_json(dir.file("tp2.json")), l1 = read_log_json(dir.file("tp1.json"));
  ASSERT_EQ(l1.train.size(), 6u);
  for (int64_t it = 7; it <= 12; ++it) {
    const double x = l2.train.at(it).at("loss").get<double>();
    EXPECT_NEAR(l1.train.at(it).at("loss").get<double>(), x, 1e-7 * x) << "iteration " << it;
  }
  // Generation from the TP=2 checkpoint, re-sharded to one process, and on two
  // ranks with TP=2: the same logits, so the same seeded sample. The text is
  // stdout alone: stderr's notes (the context window restarting) land at
  // no fixed place in it once mpirun forwards the two streams.
  const std::string gen = " generate --load " + dir.file("c2") +
                          " --prompt 'The cat' --max-new-tokens 40 --seed 3 2>" +
                          dir.file("gen_stderr.txt");
  const RunResult g1 = run("(" + megatron() + gen + ")");
  ASSERT_EQ(g1.exit_code, 0) << g1.output << read_text(dir.file("gen_stderr.txt"));
  EXPECT_NE(g1.output.find("The cat"), std::string::npos) << g1.output;
  EXPECT_GT(g1.output.size(), 40u) << g1.output;
  const RunResult g2 = run("(" + mpirun(2) + gen + " --tensor-model-parallel-size 2)");
  ASSERT_EQ(g2.exit_code, 0) << g2.output << read_text(dir.file("gen_stderr.txt"));
  auto text = [](const std::string& out) { return out.substr(out.find("The cat")); };
  EXPECT_EQ(text(g1.output), text(g2.output));
  EXPECT_NE(text(g1.output).find_first_not_of(" \n", 7), std::string::npos) << g1.output;
}

}  // namespace tensor_parallel_test
}  // namespace mt::test
