// Full activation recompute (--recompute-granularity full, uniform and block)
// gives the losses of keeping every activation — dropout on, so the masks of
// the recomputed forward must equal the first forward's — on one rank and
// with TP+SP and PP, and never plans more activation bytes (fewer with
// groups of one layer).
#include <cmath>
#include <regex>

#include "cli_test_util.h"

namespace mt::test {
namespace {

// "activations 430.8 KB" from the memory line, in bytes.
double activation_bytes(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("activations ([0-9.]+) (KB|MB|GB)"))) return -1;
  const double x = std::stod(m[1]);
  return x * (m[2] == "KB" ? 1e3 : m[2] == "MB" ? 1e6 : 1e9);
}

TEST(Recompute, FullUniformAndBlockMatchKeepingEverything) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(200));
  const std::string flags = " train" + data + tiny_model_flags() +
                            " --num-layers 4 --micro-batch-size 2 --global-batch-size 8"
                            " --train-iters 6 --hidden-dropout 0.1 --attention-dropout 0.1"
                            " --eval-interval 0";
  struct Case {
    std::string name, launcher, layout;
  };
  const Case layouts[] = {
      {"one rank", megatron(), ""},
      {"TP2 SP", mpirun(2),
       " --tensor-model-parallel-size 2 --sequence-parallel --make-vocab-size-divisible-by 64"},
      {"PP2", mpirun(2), " --pipeline-model-parallel-size 2"}};
  const std::string recompute[] = {
      " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1",
      " --recompute-granularity full --recompute-method uniform --recompute-num-layers 2",
      " --recompute-granularity full --recompute-method block --recompute-num-layers 1",
      " --recompute-granularity selective"};
  for (const Case& c : layouts) {
    const RunResult base =
        run(c.launcher + flags + c.layout + " --log-json " + dir.file("base.json"));
    ASSERT_EQ(base.exit_code, 0) << c.name << "\n" << base.output;
    const JsonLogLines ref = read_log_json(dir.file("base.json"));
    std::filesystem::remove(dir.file("base.json"));
    for (const std::string& r : recompute) {
      const RunResult got = run(c.launcher + flags + c.layout + r + " --log-json " + dir.file("r.json"));
      ASSERT_EQ(got.exit_code, 0) << c.name << r << "\n" << got.output;
      const JsonLogLines log = read_log_json(dir.file("r.json"));
      std::filesystem::remove(dir.file("r.json"));
      ASSERT_EQ(log.train.size(), 6u);
      for (const auto& [it, j] : ref.train) {
        const double a = j.at("loss").get<double>();
        EXPECT_NEAR(log.train.at(it).at("loss").get<double>(), a, 1e-6 * a) << c.name << r;
      }
      // Recomputed layers share scratch records sized for one group, so with
      // groups of one layer a chunk of L layers keeps 1 record instead of L;
      // other settings save less (a group as large as the chunk saves none).
      if (r.find("uniform --recompute-num-layers 1") != std::string::npos) {
        EXPECT_LT(activation_bytes(got.output), activation_bytes(base.output)) << c.name << r;
      } else {
        EXPECT_LE(activation_bytes(got.output), activation_bytes(base.output)) << c.name << r;
      }
    }
  }
}

}  // namespace
}  // namespace mt::test
