// Data parallelism under mpirun equals one rank: same global batch, same
// samples, same dropout masks (keyed by global sample index), gradients
// averaged over DP — so the same losses and final weights, for DP 2 and 4.
#include <cmath>

#include "checkpoint/safetensors.h"
#include "cli_test_util.h"

namespace mt::test {
namespace {

TEST(DataParallel, LossesAndWeightsMatchOneRank) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(200));
  const std::string flags = " train" + data + tiny_model_flags() +
                            " --micro-batch-size 2 --global-batch-size 8 --train-iters 12"
                            " --hidden-dropout 0.1 --attention-dropout 0.1 --eval-interval 0";
  const RunResult one = run(megatron() + flags + " --save " + dir.file("c1") + " --log-json " +
                            dir.file("one.json"));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const JsonLogLines ref = read_log_json(dir.file("one.json"));
  SafetensorsReader ref_model(dir.file("c1/iter_0000012/mp_rank_00_000/model.safetensors"));
  for (int dp : {2, 4}) {
    const std::string tag = "dp" + std::to_string(dp);
    const RunResult r = run(mpirun(dp) + flags + " --save " + dir.file(tag) + " --log-json " +
                            dir.file(tag + ".json"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("DP(" + std::to_string(dp) + ")"), std::string::npos) << r.output;
    const JsonLogLines got = read_log_json(dir.file(tag + ".json"));
    ASSERT_EQ(got.train.size(), ref.train.size());
    for (const auto& [it, j] : ref.train) {
      const double a = j.at("loss").get<double>(), b = got.train.at(it).at("loss").get<double>();
      EXPECT_NEAR(b, a, 1e-5 * std::abs(a)) << tag << " iteration " << it;
    }
    SafetensorsReader model(dir.file(tag + "/iter_0000012/mp_rank_00_000/model.safetensors"));
    for (const std::string& name : ref_model.names()) {
      const int64_t n = ref_model.info(name).numel();
      std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
      ref_model.read_f32(name, a.data(), n);
      model.read_f32(name, b.data(), n);
      double num = 0, den = 0;
      for (int64_t i = 0; i < n; ++i) {
        num += (double(a[size_t(i)]) - b[size_t(i)]) * (double(a[size_t(i)]) - b[size_t(i)]);
        den += double(a[size_t(i)]) * a[size_t(i)];
      }
      EXPECT_LT(std::sqrt(num / den), 1e-4) << tag << " " << name;
    }
  }
}

}  // namespace
}  // namespace mt::test
