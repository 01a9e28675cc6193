// Runs across emulated nodes (scripts/emulated_nodes.sh: network namespaces
// joined by a bridge, shared memory inside a node, TCP across): layouts with
// TP inside or across nodes equal one rank; --log-parallel-layout says which
// groups cross nodes; a downed inter-node link ends the job through the
// watchdog. Skipped, saying why, where network namespaces cannot be made.
#include "background_run.h"
#include "cli_test_util.h"

namespace mt::test {
namespace {

const std::string kScript = std::string(MT_SOURCE_DIR) + "/scripts/emulated_nodes.sh";

bool namespaces_allowed(std::string* why) {
  const RunResult r = run("bash " + kScript + " probe");
  *why = r.output;
  return r.exit_code == 0;
}

#define SKIP_WITHOUT_NAMESPACES()                                                         \
  do {                                                                                    \
    std::string why;                                                                      \
    if (!namespaces_allowed(&why))                                                        \
      GTEST_SKIP() << "network namespaces are not available here (needs root): " << why; \
  } while (0)

// `megatron` on nodes x slots ranks of a fresh set of emulated nodes (its id
// chosen free, written to id_file if given); extra: more mpirun flags.
std::string across_nodes(int nodes, int slots, const std::string& extra = "",
                         const std::string& id_file = "") {
  return "MT_NODES_ID=auto " + (id_file.empty() ? "" : "MT_NODES_ID_FILE=" + id_file + " ") +
         "timeout 300 bash " + kScript + " run " + std::to_string(nodes) + " " +
         std::to_string(slots) + " -- --bind-to none -n " + std::to_string(nodes * slots) +
         " -x OMP_NUM_THREADS=1 " + extra + " " + MT_BINARY;
}

std::string group_line(const std::string& out, const std::string& kind) {
  const size_t at = out.find("\n" + kind + ": ");
  if (at == std::string::npos) return "";
  return out.substr(at + 1, out.find('\n', at + 1) - at - 1);
}

TEST(EmulatedNodes, LayoutsInsideAndAcrossNodesEqualOneRank) {
  SKIP_WITHOUT_NAMESPACES();
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(100));
  const std::string train = " train" + data + tiny_model_flags() +
                            " --train-iters 12 --eval-interval 0 --global-batch-size 16"
                            " --log-parallel-layout --log-json ";
  const RunResult one = run(megatron() + train + dir.file("one.json"));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const JsonLogLines ref = read_log_json(dir.file("one.json"));

  // Megatron pads the vocabulary to a multiple of 128 x TP: TP2 pads as one
  // rank with 64.
  const std::string kPad = " --make-vocab-size-divisible-by 64";
  struct Case {
    std::string name, mpirun_extra, flags, tp, dp, pp;
  };
  const std::vector<Case> cases = {
      // Ranks fill node 1 first (0,1), then node 2 (2,3): Megatron's order
      // puts TP inside a node and DP (or PP) across.
      {"tp2-inside_dp2-across_sp", "", " --tensor-model-parallel-size 2 --sequence-parallel" + kPad,
       "inside nodes", "crosses nodes", ""},
      {"pp2-across_tp2-inside", "",
       " --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2" + kPad, "inside nodes", "",
       "crosses nodes"},
      // --map-by node deals ranks round-robin (0,2 on node 1; 1,3 on node 2).
      {"tp2-across_dp2-inside", "--map-by node", " --tensor-model-parallel-size 2" + kPad,
       "crosses nodes", "inside nodes", ""},
  };
  for (const Case& c : cases) {
    const std::string log = dir.file(c.name + ".json");
    const RunResult r = run(across_nodes(2, 2, c.mpirun_extra) + train + log + c.flags);
    ASSERT_EQ(r.exit_code, 0) << c.name << "\n" << r.output;
    EXPECT_NE(r.output.find("nodes: mt"), std::string::npos) << r.output;
    for (const auto& [kind, want] : {std::pair{"tp", c.tp}, {"dp", c.dp}, {"pp", c.pp}}) {
      if (want.empty()) continue;
      EXPECT_NE(group_line(r.output, kind).find(want), std::string::npos)
          << c.name << ": " << kind << " should be " << want << "\n" << r.output;
    }
    const JsonLogLines got = read_log_json(log);
    ASSERT_EQ(got.train.size(), 12u) << c.name << "\n" << r.output;
    for (int64_t it = 1; it <= 12; ++it) {
      const double a = ref.train.at(it).at("loss").get<double>();
      const double b = got.train.at(it).at("loss").get<double>();
      EXPECT_NEAR(b, a, 1e-5 * std::abs(a)) << c.name << " iteration " << it;
    }
  }
}

TEST(EmulatedNodes, DownedLinkEndsTheJobThroughTheTimeout) {
  SKIP_WITHOUT_NAMESPACES();
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(100));
  const double timeout_s = 6;
  BackgroundRun job(across_nodes(2, 1, "", dir.file("nodes_id")) + " train" + data +
                        tiny_model_flags() +
                        " --train-iters 100000 --eval-interval 0 --distributed-timeout-minutes 0.1"
                        " --log-json " + dir.file("log.json"),
                    dir.file(""));
  ASSERT_TRUE(wait_for_iteration(dir.file("log.json"), 3, 120)) << job.output();
  const std::string id = read_text(dir.file("nodes_id"));
  ASSERT_FALSE(id.empty());
  const RunResult cut =
      run("MT_NODES_ID=" + id.substr(0, id.find('\n')) + " bash " + kScript + " link-down 2");
  ASSERT_EQ(cut.exit_code, 0) << cut.output;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(job.wait(timeout_s + 60)) << "still running after the link went down:\n"
                                        << job.output();
  const double after =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string out = job.output();
  EXPECT_NE(job.exit_code(), 0) << out;
  EXPECT_NE(out.find("error: no progress for"), std::string::npos) << out;
  EXPECT_LE(after, timeout_s + 20) << out;
}

}  // namespace
}  // namespace mt::test
