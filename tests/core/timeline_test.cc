// The timeline recorder: off records nothing, spans come out in start order
// with their nesting, a full buffer drops and counts, and the Trace Event
// Format JSON names each rank's track.
#include "core/timeline.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace mt {
namespace timeline_test {

TEST(Timeline, OffRecordsNothing) {
  Timeline tl(16);
  {
    TimelineSpan a(&tl, TimelineKind::kForward, "forward", {.micro_batch = 0, .chunk = 0});
    TimelineSpan b(nullptr, TimelineKind::kBackward, "backward");
  }
  EXPECT_EQ(tl.size(), 0u);
  EXPECT_EQ(tl.begin(TimelineKind::kCollective, "all_gather"), -1);
  tl.start();
  tl.stop();
  { TimelineSpan c(&tl, TimelineKind::kForward, "forward"); }
  EXPECT_EQ(tl.size(), 0u);
  EXPECT_EQ(tl.dropped(), 0);
}

TEST(Timeline, SpansInStartOrderWithNesting) {
  Timeline tl(16);
  tl.start();
  tl.set_iteration(11);
  {
    TimelineSpan it(&tl, TimelineKind::kIteration, "iteration");
    {
      TimelineSpan f(&tl, TimelineKind::kForward, "forward", {.micro_batch = 3, .chunk = 1});
      TimelineSpan c(&tl, TimelineKind::kCollective, "all_reduce_sum(float)",
                     {.bytes = 4096, .group = "tp"});
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    TimelineSpan b(&tl, TimelineKind::kBackward, "backward", {.micro_batch = 3, .chunk = 1});
  }
  tl.stop();
  ASSERT_EQ(tl.size(), 4u);
  const TimelineEvent* e = tl.events();
  for (size_t i = 1; i < tl.size(); ++i) EXPECT_LE(e[i - 1].start_ns, e[i].start_ns) << i;
  for (size_t i = 0; i < tl.size(); ++i) {
    EXPECT_GE(e[i].dur_ns, 0) << i;
    EXPECT_EQ(e[i].iteration, 11);
  }
  // The iteration holds the forward, which holds its collective.
  EXPECT_LE(e[0].start_ns, e[1].start_ns);
  EXPECT_GE(e[0].start_ns + e[0].dur_ns, e[3].start_ns + e[3].dur_ns);
  EXPECT_GE(e[1].start_ns + e[1].dur_ns, e[2].start_ns + e[2].dur_ns);
  EXPECT_GE(e[2].dur_ns, 2'000'000);
  EXPECT_EQ(timeline_event_name(e[0]), "iteration 11");
  EXPECT_EQ(timeline_event_name(e[1]), "forward mb 3 chunk 1");
  EXPECT_EQ(timeline_event_name(e[2]), "all_reduce_sum(float)");
  EXPECT_STREQ(e[2].group, "tp");
  EXPECT_EQ(e[2].bytes, 4096);
}

TEST(Timeline, FullBufferDropsAndCounts) {
  Timeline tl(2);
  tl.start();
  for (int i = 0; i < 5; ++i) TimelineSpan s(&tl, TimelineKind::kCollective, "barrier");
  EXPECT_EQ(tl.size(), 2u);
  EXPECT_EQ(tl.dropped(), 3);
}

TEST(Timeline, TraceEventFormatJson) {
  Timeline a(8), b(8);
  a.start();
  b.start();
  a.set_iteration(1);
  b.set_iteration(1);
  { TimelineSpan s(&a, TimelineKind::kForward, "forward", {.micro_batch = 0, .chunk = 0}); }
  {
    TimelineSpan s(&b, TimelineKind::kCommWait, "start_all_reduce_sum(float)",
                   {.bytes = 8, .group = "d\"p"});
  }
  const std::string text =
      trace_event_json({{0, "rank 0 (TP 0, PP 0, DP 0)", a.events(), a.size()},
                        {5, "rank 5 (TP 1, PP 1, DP 0)", b.events(), b.size()}},
                       {{"\"profile_step_start\"", "10"}});
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j["otherData"]["profile_step_start"], 10);
  int x = 0, names = 0;
  for (const nlohmann::json& e : j["traceEvents"]) {
    for (const char* key : {"name", "ph", "ts", "pid", "tid"}) ASSERT_TRUE(e.contains(key)) << e;
    if (e["ph"] == "X") {
      ++x;
      EXPECT_GE(e["dur"].get<double>(), 0);
    }
    if (e["ph"] == "M" && e["name"] == "process_name") {
      ++names;
      EXPECT_EQ(e["args"]["name"].get<std::string>().rfind("rank " + e["pid"].dump() + " (", 0),
                0u);
    }
  }
  EXPECT_EQ(x, 2);
  EXPECT_EQ(names, 2);
  const nlohmann::json& wait = j["traceEvents"].back();
  EXPECT_EQ(wait["name"], "wait start_all_reduce_sum(float)");
  EXPECT_EQ(wait["cat"], "comm_wait");
  EXPECT_EQ(wait["args"]["group"], "d\"p");
  EXPECT_EQ(wait["args"]["bytes"], 8);
  EXPECT_EQ(wait["pid"], 5);
}

}  // namespace timeline_test
}  // namespace mt
