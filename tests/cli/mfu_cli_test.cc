// The MFU `megatron train` reports is never above 100%: an achieved rate above
// the start-up peak raises the peak to it and says so once (metrics.h
// reported_mfu); the peak line says where the denominator comes from.
#include <regex>

#include "cli_test_util.h"

namespace mt::test {
namespace mfu_cli_test {

TEST(MfuCli, AnAchievedRateAboveThePeakRaisesItOnce) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(40));
  // A peak of 1 MFLOP/s per rank: every interval achieves more.
  const RunResult r = run(megatron() + " train" + data + tiny_model_flags() +
                          " --train-iters 6 --eval-interval 0 --log-interval 2"
                          " --peak-tflops 0.000001 --log-json " + dir.file("log.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("GFLOP/s per rank (the MFU denominator; --peak-tflops)"),
            std::string::npos) << r.output;
  const std::string note = "peak raised to the achieved ";
  const size_t at = r.output.find(note);
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(note, at + 1), std::string::npos) << "said twice:\n" << r.output;
  EXPECT_NE(r.output.find("the start-up measurement (0.0 GFLOP/s, --peak-tflops) was low"),
            std::string::npos) << r.output;
  const std::regex mfu("MFU: ([0-9.]+)%");
  int lines = 0;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), mfu);
       it != std::sregex_iterator(); ++it, ++lines)
    EXPECT_LE(std::stod((*it)[1]), 100.0) << r.output;
  EXPECT_EQ(lines, 3) << r.output;
  const JsonLogLines log = read_log_json(dir.file("log.json"));
  ASSERT_EQ(log.train.size(), 3u);
  for (const auto& [it, j] : log.train) {
    EXPECT_LE(j.at("mfu").get<double>(), 1.0) << j.dump();
    EXPECT_GE(j.at("peak_tflops").get<double>() * (1 + 1e-9), j.at("tflops").get<double>())
        << j.dump();
  }
}

// Measured at start-up (no --peak-tflops): the line names every shape and
// its rate, the model's own linear among them.
TEST(MfuCli, TheMeasuredPeakNamesItsShapes) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(40));
  std::string flags = tiny_model_flags();
  flags.replace(flags.find(" --peak-tflops 1"), 16, "");
  const RunResult r =
      run(megatron() + " train" + data + flags + " --train-iters 6 --eval-interval 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // micro-batch 4 x seq 32 rows, ffn 4 x 32, hidden 32
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex("peak fp32 matmul: [0-9.]+ GFLOP/s per rank \\(the MFU denominator; "
                           "measured: best of 2048x2048x2048 [0-9.]+, 4096x2048x1024 [0-9.]+, "
                           "128x128x32 [0-9.]+ GFLOP/s, best of [0-9]+ rounds in [0-9.]+ s, "
                           "oneDNN\\)")))
      << r.output;
}

}  // namespace mfu_cli_test
}  // namespace mt::test
