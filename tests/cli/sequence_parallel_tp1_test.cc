// --sequence-parallel with TP 1, as Megatron-LM treats it
// (training/arguments.py): switched off with one warning, and the run goes on
// as without it. train prints the warning once (rank 0) and gives the losses
// of the run without the flag; plan plans the TP 1 layouts without SP.
#include "cli_test_util.h"

namespace mt::test {
namespace sequence_parallel_tp1_test {

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t p = text.find(part); p != std::string::npos; p = text.find(part, p + 1)) ++n;
  return n;
}

TEST(SequenceParallelWithoutTp, TrainWarnsOnceAndTrainsAsWithout) {
  TempDir dir;
  const std::string launch = mpirun(2) + " train" + prepare_data(dir, synthetic_corpus(50)) +
                             tiny_model_flags() + " --train-iters 6 --eval-interval 3 --log-json ";
  const RunResult ref = run(launch + dir.file("ref.json"));
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  const RunResult sp = run(launch + dir.file("sp.json") + " --sequence-parallel");
  ASSERT_EQ(sp.exit_code, 0) << sp.output;  // DP 2 x TP 1
  EXPECT_EQ(count(sp.output, "warning: --sequence-parallel with --tensor-model-parallel-size 1: "
                             "sequence parallelism is off"),
            1u)
      << sp.output;
  EXPECT_EQ(count(ref.output, "warning: --sequence-parallel"), 0u) << ref.output;
  const JsonLogLines a = read_log_json(dir.file("ref.json")), b = read_log_json(dir.file("sp.json"));
  ASSERT_EQ(a.train.size(), 6u);
  ASSERT_FALSE(a.eval.empty());
  expect_same_losses(a, b, "--sequence-parallel at TP 1", 0.0);
}

TEST(SequenceParallelWithoutTp, PlanWarnsOnceAndPlansAsWithout) {
  TempDir dir;
  const std::string plan = "env MEGATRON_DEVICES_DIR=" + std::string(MT_SOURCE_DIR) +
                           "/configs/devices " + megatron() +
                           " plan --num-layers 4 --hidden-size 256 --num-attention-heads 8"
                           " --seq-length 64 --vocab-size 1000 --global-batch-size 8"
                           " --num-nodes 1 --devices-per-node 2 --device a100-80gb --json --top 0"
                           " --tensor-model-parallel-size 1";
  const RunResult ref = run_stdout(plan, dir.file("ref.err"));
  ASSERT_EQ(ref.exit_code, 0) << ref.output << read_text(dir.file("ref.err"));
  const RunResult sp = run_stdout(plan + " --sequence-parallel", dir.file("sp.err"));
  const std::string err = read_text(dir.file("sp.err"));
  ASSERT_EQ(sp.exit_code, 0) << sp.output << err;
  EXPECT_EQ(count(err, "warning: --sequence-parallel has no effect on layouts with TP 1"), 1u)
      << err;
  EXPECT_EQ(count(err, "\n"), 1u) << err;
  EXPECT_NE(ref.output.find("\"tp\":1"), std::string::npos) << ref.output;
  EXPECT_EQ(sp.output, ref.output);
}

}  // namespace sequence_parallel_tp1_test
}  // namespace mt::test
