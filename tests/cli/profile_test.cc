// --profile: a TP2 x PP2 run's merged timeline is valid Trace Event Format
// with one named track per rank; its iteration, forward/backward and bubble
// agree with the --log-json numbers; collectives carry group and bytes; the
// range follows Megatron's counting; bad flags end the run with one line.
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "bad_input_util.h"
#include "cli_test_util.h"

namespace mt::test {
namespace profile_test {

// Checks the Trace Event Format and returns the parsed trace.
nlohmann::json read_trace(const std::string& path) {
  const nlohmann::json j = nlohmann::json::parse(read_text(path));
  EXPECT_TRUE(j.contains("traceEvents"));
  for (const nlohmann::json& e : j.at("traceEvents")) {
    for (const char* key : {"name", "ph", "ts", "pid", "tid"})
      EXPECT_TRUE(e.contains(key)) << key << " missing in " << e;
    if (e.at("ph") == "X") {
      EXPECT_TRUE(e.contains("dur")) << e;
      EXPECT_GE(e.at("dur").get<double>(), 0) << e;
      EXPECT_GE(e.at("ts").get<double>(), 0) << e;
    }
  }
  return j;
}

// Per (pid, iteration): the iteration span's duration (microseconds), and
// the spans inside it that nothing else recorded holds (top level), summed
// by kind.
struct Sums {
  double iteration = 0, recv = 0;     // recv: the receive waits (the bubble)
  double spans = 0;                   // every top-level span
  std::map<std::string, double> top;  // every top-level kind
  int forwards = 0, backwards = 0;
};

std::map<std::pair<int, int64_t>, Sums> sums_of(const nlohmann::json& trace) {
  std::map<std::pair<int, int64_t>, Sums> out;
  std::map<std::pair<int, int64_t>, std::pair<double, double>> window;  // iteration span
  for (const nlohmann::json& e : trace.at("traceEvents"))
    if (e.at("ph") == "X" && e.at("cat") == "iteration") {
      const std::pair<int, int64_t> key{e.at("pid"), e.at("args").at("iteration")};
      window[key] = {e.at("ts").get<double>(),
                     e.at("ts").get<double>() + e.at("dur").get<double>()};
      out[key].iteration = e.at("dur").get<double>();
    }
  std::map<std::pair<int, int64_t>, double> top_end;         // end of the last top-level span
  for (const nlohmann::json& e : trace.at("traceEvents")) {  // in start order per rank
    if (e.at("ph") != "X" || e.at("cat") == "iteration") continue;
    const std::pair<int, int64_t> key{e.at("pid"), e.at("args").at("iteration")};
    const double ts = e.at("ts").get<double>(), dur = e.at("dur").get<double>();
    if (!window.count(key) || ts < window[key].first || ts + dur > window[key].second) continue;
    if (top_end.count(key) && ts < top_end[key]) continue;  // nested in the previous one
    top_end[key] = ts + dur;
    Sums& s = out[key];
    const std::string cat = e.at("cat");
    if (cat == "pipeline_recv") s.recv += dur;
    s.top[cat] += dur;
    s.spans += dur;
    s.forwards += cat == "forward";
    s.backwards += cat == "backward";
  }
  return out;
}

TEST(Profile, Tp2Pp2TimelineMatchesTheLog) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(200));
  // 8 micro-batches of 2 on 2 stages; iterations 2 and 3 profiled (Megatron's
  // start 1, end 3), a checkpoint saved at 3 inside the range.
  const RunResult r =
      run(mpirun(4) + " train" + data + tiny_model_flags() +
          " --num-layers 4 --micro-batch-size 2 --global-batch-size 16 --train-iters 4 "
          "--lr-warmup-iters 1"
          " --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel"
          " --make-vocab-size-divisible-by 64 --eval-interval 0 --save " +
          dir.file("ckpt") + " --save-interval 3 --log-json " + dir.file("log.json") +
          " --profile --profile-step-start 1 --profile-step-end 3 --profile-ranks 0 1 2 3"
          " --profile-dir " +
          dir.file("prof"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string path = dir.file("prof/timeline_iters_2-3.json");
  EXPECT_NE(r.output.find("written to " + path), std::string::npos) << r.output;
  ASSERT_TRUE(exists(path)) << r.output;
  EXPECT_FALSE(exists(path + ".tmp"));
  const nlohmann::json trace = read_trace(path);
  const JsonLogLines log = read_log_json(dir.file("log.json"));

  // One named track per rank: "rank R (TP t, PP p, DP 0)".
  std::map<int, std::string> names;
  for (const nlohmann::json& e : trace.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "process_name")
      names[e.at("pid").get<int>()] = e.at("args").at("name");
  ASSERT_EQ(names.size(), 4u);
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_EQ(names[rank], "rank " + std::to_string(rank) + " (TP " + std::to_string(rank % 2) +
                               ", PP " + std::to_string(rank / 2) + ", DP 0)");

  // Only iterations 2 and 3; collectives with their group and bytes; the
  // gradient sync, optimizer step and checkpoint save of every rank.
  std::set<int64_t> iterations;
  std::set<std::string> groups;
  std::map<int, std::set<std::string>> cats;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    iterations.insert(e.at("args").at("iteration").get<int64_t>());
    cats[e.at("pid").get<int>()].insert(e.at("cat").get<std::string>());
    if (e.at("cat") == "collective") {
      ASSERT_TRUE(e.at("args").contains("group")) << e;
      ASSERT_TRUE(e.at("args").contains("bytes")) << e;
      if (e.at("args").at("bytes").get<int64_t>() > 0) groups.insert(e.at("args").at("group"));
    }
  }
  EXPECT_EQ(iterations, (std::set<int64_t>{2, 3}));
  for (const char* g : {"tp", "pp", "mp"}) EXPECT_TRUE(groups.count(g)) << g;
  for (int rank = 0; rank < 4; ++rank)
    for (const char* c : {"iteration", "forward", "backward", "pipeline_recv", "pipeline_send",
                          "collective", "grad_sync", "optimizer", "checkpoint"})
      EXPECT_TRUE(cats[rank].count(c)) << "rank " << rank << " has no " << c << " span";

  // Per rank and iteration: the iteration span is the logged iteration time;
  // the top-level spans (forward, backward, the receive waits — the bubble —
  // the sends, the exposed communication and the optimizer step) fill it:
  // never more than it (within 10%), and on the better of the two
  // iterations within 10% of it. Only the better one: four ranks share two
  // cores here (and CI runs another test beside this one), so a rank taken
  // off its core while between two spans leaves a hole of a scheduler slice
  // (~4 ms of a ~40 ms iteration) in a random iteration; a phase the
  // timeline does not record leaves it in both. The bubble (receive waits /
  // iteration time, training_log.cc's definition) is the logged bubble of
  // the rank's stage (within 10%).
  const auto sums = sums_of(trace);
  for (int rank = 0; rank < 4; ++rank) {
    double best_fill = 0;
    std::string fills;
    for (int64_t it : {2, 3}) {
      const std::string where = "rank " + std::to_string(rank) + " iteration " + std::to_string(it);
      const Sums& s = sums.at({rank, it});
      const nlohmann::json& logged = log.train.at(it);
      const double logged_us = 1e3 * logged.at("ms_per_iter").get<double>();
      EXPECT_EQ(s.forwards, 8) << where;
      EXPECT_EQ(s.backwards, 8) << where;
      EXPECT_NEAR(s.iteration, logged_us, 0.1 * logged_us) << where;
      std::string spans =
          where + ": logged " + std::to_string(logged_us) + " us, top-level spans (us):";
      for (const auto& [k, v] : s.top) spans += " " + k + " " + std::to_string(v);
      EXPECT_LE(s.spans, 1.1 * logged_us) << spans;
      best_fill = std::max(best_fill, s.spans / logged_us);
      fills += "\n" + spans;
      const double logged_bubble = logged.at("bubble_per_stage").at(size_t(rank / 2));
      if (rank % 2 == 0) {  // rank 0's pipeline (TP rank 0) is the one logged
        EXPECT_NEAR(s.recv / s.iteration, logged_bubble, 0.1 * logged_bubble + 1e-3)
            << where << ": trace bubble vs logged";
      }
    }
    EXPECT_GE(best_fill, 0.9) << "rank " << rank
                              << ": the spans leave over 10% of both iterations unrecorded"
                              << fills;
  }
}

TEST(Profile, RangeFollowsMegatronAndDefaultsToSaveDir) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(50));
  const std::string base = megatron() + " train" + data + tiny_model_flags() +
                           " --train-iters 5 --lr-warmup-iters 1 --eval-interval 0 --profile";
  // end past --train-iters: the timeline stops with training (iterations 4-5), in --save.
  RunResult r = run(base + " --profile-step-start 3 --profile-step-end 9 --save " +
                    dir.file("ckpt") + " --use-pytorch-profiler");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--use-pytorch-profiler changes nothing"), std::string::npos) << r.output;
  const nlohmann::json trace = read_trace(dir.file("ckpt/timeline_iters_4-5.json"));
  std::set<int64_t> iterations;
  for (const nlohmann::json& e : trace.at("traceEvents"))
    if (e.at("ph") == "X") iterations.insert(e.at("args").at("iteration").get<int64_t>());
  EXPECT_EQ(iterations, (std::set<int64_t>{4, 5}));
  // start at or past --train-iters: nothing recorded, as Megatron (a note, exit 0).
  r = run(base + " --profile-step-start 5 --profile-step-end 7 --profile-dir " + dir.file("p2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("no timeline is recorded"), std::string::npos) << r.output;
  EXPECT_FALSE(exists(dir.file("p2/timeline_iters_6-7.json")));
}

class ProfileBadInput : public BadInputFixture {};

TEST_F(ProfileBadInput, OneLineBeforeTraining) {
  const BadInputCase cases[] = {
      {"inverted range", train(" --profile --profile-step-start 5 --profile-step-end 5"),
       "--profile-step-end 5 is not after --profile-step-start 5"},
      {"negative start", train(" --profile --profile-step-start -1"),
       "--profile-step-start -1 is negative"},
      {"no such rank", train(" --profile --profile-ranks 0 1"),
       "--profile-ranks 1: no such rank in this run of 1 rank"},
      {"unwritable dir", train(" --profile --profile-dir {dir}corpus.txt/sub"),
       "--profile: cannot create --profile-dir"},
  };
  for (const BadInputCase& c : cases) expect_fails(c);
  // On 2 ranks: every rank ends, none left waiting.
  const RunResult r =
      run(mpirun(2) + substitute(train(" --profile --profile-ranks 0 2"), data, dir.file("")));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_LT(r.exit_code, 124) << "timed out\n" << r.output;
  EXPECT_NE(r.output.find("--profile-ranks 2: no such rank in this run of 2 ranks"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("iteration        1/"), std::string::npos) << "trained:\n" << r.output;
}

}  // namespace profile_test
}  // namespace mt::test
