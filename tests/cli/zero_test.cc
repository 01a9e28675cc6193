// The distributed optimizer (ZeRO-1, --use-distributed-optimizer) under
// mpirun equals the plain optimizer at the same layout: per-iteration losses
// and evaluations (1e-7 relative) and the final weights gathered from every
// (TP, PP) shard (1e-6), with dropout on and clipping active, also with the
// overlapped reduce-scatter and parameter all-gather. Its checkpoints (one
// optim_dp_DDD file of slices per DP rank) resume at other DP, TP and PP
// sizes, with the plain optimizer too, and a checkpoint with missing
// optimizer slices is refused with a clear message.
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "checkpoint_test_util.h"
#include "cli_test_util.h"

namespace mt::test {
namespace zero_test {

struct Layout {
  int tp, pp, dp;
  const char* extra;  // more flags for the distributed-optimizer run
};

std::string layout_flags(int tp, int pp) {
  return " --tensor-model-parallel-size " + std::to_string(tp) +
         " --pipeline-model-parallel-size " + std::to_string(pp) +
         " --make-vocab-size-divisible-by " + std::to_string(128 / tp) +
         (tp > 1 ? " --sequence-parallel" : "");
}

TEST(DistributedOptimizer, MatchesThePlainOptimizerAtEachLayout) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(200));
  const std::string flags = " train" + data + tiny_model_flags() +
                            " --num-layers 4 --micro-batch-size 2 --global-batch-size 16"
                            " --train-iters 6 --hidden-dropout 0.1 --attention-dropout 0.1"
                            " --clip-grad 1.0 --eval-interval 3 --eval-iters 2";
  const Layout layouts[] = {
      {1, 1, 2, ""},
      {2, 1, 2, ""},
      {1, 2, 2, ""},
      {2, 2, 2, ""},
      {2, 2, 2, " --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 3000"}};
  for (const Layout& l : layouts) {
    const std::string base = "tp" + std::to_string(l.tp) + "pp" + std::to_string(l.pp) + "dp" +
                             std::to_string(l.dp);
    const std::string tag = base + (*l.extra ? "_overlap" : "");
    const std::string run_flags = flags + layout_flags(l.tp, l.pp);
    const int n = l.tp * l.pp * l.dp;
    if (!exists(dir.file(base + "_plain.json"))) {
      const RunResult plain = run(mpirun(n) + run_flags + " --save " + dir.file(base + "_plain") +
                                  " --log-json " + dir.file(base + "_plain.json"));
      ASSERT_EQ(plain.exit_code, 0) << base << "\n" << plain.output;
    }
    const RunResult zero =
        run(mpirun(n) + run_flags + " --use-distributed-optimizer" + l.extra + " --save " +
            dir.file(tag) + " --log-json " + dir.file(tag + ".json"));
    ASSERT_EQ(zero.exit_code, 0) << tag << "\n" << zero.output;
    const JsonLogLines ref = read_log_json(dir.file(base + "_plain.json"));
    const JsonLogLines got = read_log_json(dir.file(tag + ".json"));
    ASSERT_EQ(ref.train.size(), 6u) << tag;
    expect_same_losses(ref, got, tag);
    double max_norm = 0;
    for (const auto& [it, j] : ref.train)
      max_norm = std::max(max_norm, j.at("grad_norm").get<double>());
    EXPECT_GT(max_norm, 1.0) << tag << ": clipping never active";
    // Final weights, every parameter, gathered over TP and PP.
    const std::string ref_iter = dir.file(base + "_plain/iter_0000006");
    const std::string got_iter = dir.file(tag + "/iter_0000006");
    for (int stage = 0; stage < l.pp; ++stage) {
      char rank_dir[32];
      std::snprintf(rank_dir, sizeof rank_dir, "/mp_rank_00_%03d", stage);
      SafetensorsReader names(ref_iter + rank_dir + "/model.safetensors");
      for (const std::string& name : names.names())
        EXPECT_LT(rel_diff(gathered(ref_iter, name, l.tp, l.pp),
                           gathered(got_iter, name, l.tp, l.pp)),
                  weight_tolerance(name))
            << tag << " " << name;
      // One optimizer file per DP rank, of slices.
      for (int d = 0; d < l.dp; ++d) {
        char file[48];
        std::snprintf(file, sizeof file, "/optim_dp_%03d.safetensors", d);
        ASSERT_TRUE(exists(got_iter + rank_dir + file)) << tag << " " << rank_dir << file;
        SafetensorsReader r(got_iter + rank_dir + file);
        EXPECT_NE(r.metadata_or("slices", ""), "") << r.path();
        EXPECT_EQ(r.metadata_or("steps", ""), "6") << r.path();
      }
      EXPECT_FALSE(exists(ref_iter + rank_dir + "/optim_dp_001.safetensors"))
          << "the plain optimizer writes one file";
    }
  }
}

TEST(DistributedOptimizer, CheckpointResumesAtOtherDpTpPpAndChecksSlices) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(200));
  const std::string flags = " train" + data + tiny_model_flags() +
                            " --micro-batch-size 2 --global-batch-size 8 --train-iters 8"
                            " --hidden-dropout 0.1 --attention-dropout 0.1 --eval-interval 0";
  const std::string zero = " --use-distributed-optimizer";
  const RunResult save =
      run(mpirun(2) + flags + zero + " --exit-interval 4 --save " + dir.file("c"));
  ASSERT_EQ(save.exit_code, 0) << save.output;
  const std::string saved = dir.file("c/iter_0000004/mp_rank_00_000");
  ASSERT_TRUE(exists(saved + "/optim_dp_000.safetensors"));
  ASSERT_TRUE(exists(saved + "/optim_dp_001.safetensors"));
  // Continuing at DP=2 is the reference.
  const RunResult ref = run(mpirun(2) + flags + zero + " --load " + dir.file("c") + " --log-json " +
                            dir.file("ref.json"));
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  const JsonLogLines want = read_log_json(dir.file("ref.json"));
  ASSERT_EQ(want.train.size(), 4u);
  struct Resume {
    const char* tag;
    std::string launch;
  };
  const Resume resumes[] = {
      {"dp1_zero", megatron() + flags + zero},
      {"dp1_plain", megatron() + flags},
      {"dp4_zero", mpirun(4) + flags + zero + " --ddp-bucket-size 3000"},
      {"tp2pp2_zero", mpirun(4) + flags + zero +
                          " --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2"
                          " --sequence-parallel"},
  };
  for (const Resume& r : resumes) {
    const RunResult got = run(r.launch + " --load " + dir.file("c") + " --log-json " +
                              dir.file(std::string(r.tag) + ".json"));
    ASSERT_EQ(got.exit_code, 0) << r.tag << "\n" << got.output;
    expect_same_losses(want, read_log_json(dir.file(std::string(r.tag) + ".json")), r.tag);
  }
  // A missing DP file leaves slices uncovered; no file at all: no state.
  namespace fs = std::filesystem;
  fs::copy(dir.file("c"), dir.file("bad"), fs::copy_options::recursive);
  const std::string bad = dir.file("bad/iter_0000004/mp_rank_00_000");
  fs::remove(bad + "/optim_dp_001.safetensors");
  // meta.json lists every file it saved: the missing one is named.
  const RunResult listed = run(megatron() + flags + zero + " --load " + dir.file("bad"));
  EXPECT_NE(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find("optim_dp_001.safetensors is missing"), std::string::npos)
      << listed.output;
  EXPECT_NE(listed.output.find("--no-load-optim"), std::string::npos) << listed.output;
  // A checkpoint from before that list (no "files" in meta.json): the slices
  // found must still cover the whole state.
  const std::string meta_path = dir.file("bad/iter_0000004/meta.json");
  nlohmann::json meta = nlohmann::json::parse(read_text(meta_path));
  ASSERT_EQ(meta.erase("files"), 1u);
  write_text(meta_path, meta.dump());
  const RunResult partial = run(megatron() + flags + zero + " --load " + dir.file("bad"));
  EXPECT_NE(partial.exit_code, 0) << partial.output;
  EXPECT_NE(partial.output.find("cover only"), std::string::npos) << partial.output;
  EXPECT_NE(partial.output.find("--no-load-optim"), std::string::npos) << partial.output;
  fs::remove(bad + "/optim_dp_000.safetensors");
  const RunResult none = run(megatron() + flags + " --load " + dir.file("bad"));
  EXPECT_NE(none.exit_code, 0) << none.output;
  EXPECT_NE(none.output.find("no optimizer state"), std::string::npos) << none.output;
  EXPECT_NE(none.output.find("--no-load-optim"), std::string::npos) << none.output;
  const RunResult fresh = run(megatron() + flags + zero + " --load " + dir.file("bad") +
                              " --no-load-optim");
  EXPECT_EQ(fresh.exit_code, 0) << fresh.output;
}

}  // namespace zero_test
}  // namespace mt::test
