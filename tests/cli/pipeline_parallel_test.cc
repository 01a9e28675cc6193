// Pipeline parallelism (1F1B, interleaved, uneven splits) with TP, SP and DP
// under mpirun equals one
// rank: per-iteration losses (1e-7) and final weights gathered from every
// (TP, PP) shard (1e-6), dropout on; and checkpoints re-shard across TP/PP.
#include <cmath>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "checkpoint_test_util.h"
#include "cli_test_util.h"

namespace mt::test {
namespace pipeline_parallel_test {

struct Layout {
  int tp, pp, dp;
  bool sp;
  int m;              // micro-batches per DP rank
  const char* extra;  // more flags for the parallel run
};

TEST(PipelineParallel, LayoutsMatchOneRank) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(200));
  const Layout layouts[] = {{1, 2, 1, false, 4, ""},
                            {1, 4, 1, false, 8, ""},
                            {2, 2, 1, true, 4, ""},
                            {1, 2, 2, false, 4, ""},
                            {2, 2, 2, true, 4, ""},
                            {1, 2, 1, false, 4, " --decoder-last-pipeline-num-layers 1"},
                            {1, 2, 1, false, 4, " --num-layers-per-virtual-pipeline-stage 1"},
                            {2, 2, 1, true, 4, " --num-layers-per-virtual-pipeline-stage 1"}};
  for (const Layout& l : layouts) {
    const int global = 2 * l.m * l.dp;  // micro-batch 2
    const std::string flags = " train" + data + tiny_model_flags() +
                              " --num-layers 4 --micro-batch-size 2 --global-batch-size " +
                              std::to_string(global) +
                              " --train-iters 6 --hidden-dropout 0.1 --attention-dropout 0.1"
                              " --eval-interval 3 --eval-iters 2";
    const std::string tag = "tp" + std::to_string(l.tp) + "pp" + std::to_string(l.pp) + "dp" +
                            std::to_string(l.dp) + (l.sp ? "sp" : "") + (std::string(l.extra).find("virtual") != std::string::npos ? "v2"
                             : *l.extra                                               ? "uneven"
                                                                                      : "");
    const RunResult one = run(megatron() + flags + " --make-vocab-size-divisible-by 128 --save " +
                              dir.file(tag + "_ref") + " --log-json " + dir.file(tag + "_ref.json"));
    ASSERT_EQ(one.exit_code, 0) << one.output;
    const RunResult r = run(
        mpirun(l.tp * l.pp * l.dp) + flags + " --tensor-model-parallel-size " +
        std::to_string(l.tp) + " --pipeline-model-parallel-size " + std::to_string(l.pp) +
        " --make-vocab-size-divisible-by " + std::to_string(128 / l.tp) +
        (l.sp ? " --sequence-parallel" : "") + l.extra + " --save " + dir.file(tag) + " --log-json " +
        dir.file(tag + ".json"));
    ASSERT_EQ(r.exit_code, 0) << tag << "\n" << r.output;
    EXPECT_NE(r.output.find("bubble per stage"), std::string::npos) << r.output;
    const JsonLogLines ref = read_log_json(dir.file(tag + "_ref.json"));
    const JsonLogLines got = read_log_json(dir.file(tag + ".json"));
    ASSERT_EQ(got.train.size(), 6u) << tag;
    expect_same_losses(ref, got, tag);
    SafetensorsReader ref_model(dir.file(tag + "_ref/iter_0000006/mp_rank_00_000/model.safetensors"));
    for (const std::string& name : ref_model.names()) {
      std::vector<float> a(static_cast<size_t>(ref_model.info(name).numel()));
      ref_model.read_f32(name, a.data(), int64_t(a.size()));
      EXPECT_LT(rel_diff(a, gathered(dir.file(tag + "/iter_0000006"), name, l.tp, l.pp)),
                weight_tolerance(name))
          << tag << " " << name;
    }
  }
}

TEST(PipelineParallel, SaveAtTp2Pp2ResumeAtOtherLayouts) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(200));
  const std::string flags = " train" + data + tiny_model_flags() +
                            " --num-layers 4 --micro-batch-size 2 --global-batch-size 8"
                            " --train-iters 10 --make-vocab-size-divisible-by 64"
                            " --hidden-dropout 0.1 --attention-dropout 0.1 --eval-interval 0";
  const std::string tp2pp2 = " --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2";
  const JsonLogLines ref = save_at_5_and_resume(dir, mpirun(4) + flags + tp2pp2);
  ASSERT_EQ(ref.train.size(), 5u);
  const std::pair<std::string, std::string> others[] = {
      {"tp1pp4", mpirun(4) + flags + " --pipeline-model-parallel-size 4"},
      {"tp1pp2uneven", mpirun(2) + flags + " --pipeline-model-parallel-size 2"
                                           " --decoder-first-pipeline-num-layers 3"},
      {"tp2pp2v2", mpirun(4) + flags + tp2pp2 + " --num-layers-per-virtual-pipeline-stage 1"},
      {"tp1pp1", megatron() + flags}};
  for (const auto& [tag, cmd] : others) expect_resume_equal(dir, tag, cmd, ref, 1e-7);
}

}  // namespace pipeline_parallel_test
}  // namespace mt::test
