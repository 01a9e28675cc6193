// Runs across emulated nodes (scripts/emulated_nodes.sh: network namespaces
// joined by a bridge, shared memory inside a node, TCP across): layouts with
// TP inside or across nodes equal one rank; --log-parallel-layout says which
// groups cross nodes; a downed inter-node link ends the job through the
// watchdog. Needs root (network namespaces); fails, saying why, without them.
#include "cli/background_run.h"
#include "cli/cli_test_util.h"

namespace mt::test {
namespace emulated_nodes_test {

const std::string kScript = std::string(MT_SOURCE_DIR) + "/scripts/emulated_nodes.sh";

bool namespaces_allowed(std::string* why) {
  const RunResult r = run("bash " + kScript + " probe");
  *why = r.output;
  return r.exit_code == 0;
}

// Tests and CI run as root (README): no namespaces is a failure, not a skip.
#define REQUIRE_NAMESPACES()                                                        \
  do {                                                                                   \
    std::string why;                                                                     \
    ASSERT_TRUE(namespaces_allowed(&why))                                                \
        << "network namespaces are not available here (needs root): " << why;            \
  } while (0)

// `megatron` on nodes x slots ranks of a fresh set of emulated nodes with
// the id `id` (each test its own: tests that run at the same time never
// share namespaces, and one test's runs follow each other); extra: more
// mpirun flags.
std::string across_nodes(int id, int nodes, int slots, const std::string& extra = "") {
  return "MT_NODES_ID=" + std::to_string(id) + " timeout 300 bash " + kScript + " run " +
         std::to_string(nodes) + " " + std::to_string(slots) + " -- --bind-to none -n " +
         std::to_string(nodes * slots) + " -x OMP_NUM_THREADS=1 " + extra + " " + MT_BINARY;
}
constexpr int kLayoutsId = 41, kLinkId = 42;
int fault_id(int fault) { return 43 + fault; }

std::string group_line(const std::string& out, const std::string& kind) {
  const size_t at = out.find("\n" + kind + ": ");
  if (at == std::string::npos) return "";
  return out.substr(at + 1, out.find('\n', at + 1) - at - 1);
}

TEST(EmulatedNodes, LayoutsInsideAndAcrossNodesEqualOneRank) {
  REQUIRE_NAMESPACES();
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
    const RunResult r = run(across_nodes(kLayoutsId, 2, 2, c.mpirun_extra) + train + log + c.flags);
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
  REQUIRE_NAMESPACES();
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(100));
  const double timeout_s = 6;
  BackgroundRun job(across_nodes(kLinkId, 2, 1) + " train" + data +
                        tiny_model_flags() +
                        " --train-iters 100000 --eval-interval 0 --distributed-timeout-minutes 0.1"
                        " --log-json " + dir.file("log.json"),
                    dir.file(""));
  ASSERT_TRUE(wait_for_iteration(dir.file("log.json"), 3, 120)) << job.output();
  const RunResult cut =
      run("MT_NODES_ID=" + std::to_string(kLinkId) + " bash " + kScript + " link-down 2");
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

// Faults on 2 nodes x 2 ranks (TP2 inside, DP2 across; a checkpoint every 4
// iterations): each ends the whole job in bounded time with a message
// saying what happened, and a resume from the last checkpoint continues with
// the uninterrupted run's losses (one rank's, to layout round-off).
enum class Fault { kKillRankOnOtherNode, kKillWholeNode, kSigtermAllRanks };

void expect_fault_ends_job_and_resume_matches(Fault fault) {
  REQUIRE_NAMESPACES();
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(100));
  const std::string train = " train" + data + tiny_model_flags() +
                            " --train-iters 40 --eval-interval 0 --global-batch-size 16";
  const RunResult one = run(megatron() + train + " --log-json " + dir.file("one.json"));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const std::string parallel = " --tensor-model-parallel-size 2 --make-vocab-size-divisible-by 64"
                               " --save-interval 4 --save " +
                               dir.file("ckpt") + " --distributed-timeout-minutes 0.1";
  // An evaluation after every iteration slows the run down (it does not
  // change the training losses), so that the fault lands mid-run.
  const int id = fault_id(int(fault));
  BackgroundRun job(across_nodes(id, 2, 2) + train + parallel +
                        " --eval-interval 1 --eval-iters 20 --log-json " + dir.file("a.json"),
                    dir.file(""));
  ASSERT_TRUE(wait_for_iteration(dir.file("a.json"), 6, 120)) << job.output();
  ASSERT_FALSE(wait_for_iteration(dir.file("a.json"), 40, 0)) << "too fast to fault mid-run";
  const std::string node2 = "mt" + std::to_string(id) + "n2";
  if (fault == Fault::kKillRankOnOtherNode) {
    const std::vector<pid_t> p = BackgroundRun::pids_matching(dir.file(""), 3);
    ASSERT_EQ(p.size(), 1u);
    ::kill(p[0], SIGKILL);
  } else if (fault == Fault::kKillWholeNode) {  // its ranks and Open MPI's daemon
    ASSERT_EQ(run("kill -9 $(ip netns pids " + node2 + ")").exit_code, 0);
  } else {
    for (int r = 0; r < 4; ++r)
      for (pid_t p : BackgroundRun::pids_matching(dir.file(""), r)) ::kill(p, SIGTERM);
  }
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(job.wait(60)) << job.output();
  const double after =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string out = job.output();
  std::printf("the fault ended the job in %.1f s\n", after);
  EXPECT_LE(after, 20) << out;
  if (fault == Fault::kSigtermAllRanks) {
    EXPECT_EQ(job.exit_code(), 0) << out;  // saved at the end of the iteration
  } else {
    EXPECT_NE(job.exit_code(), 0) << out;
    EXPECT_TRUE(out.find("exited on signal 9") != std::string::npos ||
                out.find("lost communication with a remote daemon") != std::string::npos)
        << out;
  }
  // Resume from the last complete checkpoint; run to iteration 40.
  const RunResult resumed = run(across_nodes(id, 2, 2) + train + parallel + " --load " +
                                dir.file("ckpt") + " --log-json " + dir.file("b.json"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const JsonLogLines ref = read_log_json(dir.file("one.json"));
  const JsonLogLines b = read_log_json(dir.file("b.json"));
  ASSERT_FALSE(b.train.empty()) << resumed.output;
  EXPECT_EQ(b.train.rbegin()->first, 40);
  EXPECT_GE(b.train.begin()->first, 5);  // it resumed, from a checkpoint after the first
  for (const auto& [it, entry] : b.train) {
    const double want = ref.train.at(it).at("loss").get<double>();
    EXPECT_NEAR(entry.at("loss").get<double>(), want, 1e-5 * std::abs(want)) << "iteration " << it;
  }
}

TEST(EmulatedNodes, KilledRankOnTheOtherNodeEndsTheJobAndResumes) {
  expect_fault_ends_job_and_resume_matches(Fault::kKillRankOnOtherNode);
}

TEST(EmulatedNodes, KilledNodeEndsTheJobAndResumes) {
  expect_fault_ends_job_and_resume_matches(Fault::kKillWholeNode);
}

TEST(EmulatedNodes, SigtermToAllRanksSavesAndResumes) {
  expect_fault_ends_job_and_resume_matches(Fault::kSigtermAllRanks);
}

}  // namespace emulated_nodes_test
}  // namespace mt::test
