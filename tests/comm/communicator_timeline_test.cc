// The communicator's timeline hooks and gather_bytes (any world size; run
// under mpirun too): each call spans the timeline with its group and bytes
// while it records, nothing when it does not; variable sizes gather in order.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace mt {
namespace communicator_timeline_test {

TEST(CommunicatorTimeline, SpansCarryGroupAndBytes) {
  Communicator c = Communicator::world();
  Timeline tl(64);
  c.set_timeline(&tl);
  std::vector<float> x(10, 1.f);
  c.all_reduce_sum(x.data(), 10);  // not recording: nothing
  EXPECT_EQ(tl.size(), 0u);
  tl.start();
  c.all_reduce_sum(x.data(), 10);
  {
    CommHandle h = c.start_all_reduce_sum(x.data(), 10);
    h.wait();
  }
  tl.stop();
  c.set_timeline(nullptr);
  ASSERT_GE(tl.size(), 1u);
  const TimelineEvent& e = tl.events()[0];
  EXPECT_EQ(e.kind, TimelineKind::kCollective);
  EXPECT_STREQ(e.name, "all_reduce_sum(float)");
  EXPECT_STREQ(e.group, "world");
  EXPECT_EQ(e.bytes, 40);
  EXPECT_GE(e.dur_ns, 0);
  if (c.size() > 1) {  // a group of one posts nothing
    ASSERT_EQ(tl.size(), 3u);
    EXPECT_EQ(tl.events()[1].kind, TimelineKind::kCommStart);
    EXPECT_EQ(tl.events()[2].kind, TimelineKind::kCommWait);
    EXPECT_EQ(tl.events()[2].bytes, 40);
    EXPECT_EQ(timeline_event_name(tl.events()[2]), "wait start_all_reduce_sum(float)");
  }
}

TEST(CommunicatorTimeline, GatherBytesOfVariableSizes) {
  Communicator c = Communicator::world();
  const int root = c.size() - 1;
  const std::string mine(size_t(c.rank()) * 3, char('a' + c.rank()));  // rank 0 sends nothing
  const std::vector<std::vector<char>> got = c.gather_bytes(mine.data(), mine.size(), root);
  if (c.rank() != root) {
    EXPECT_TRUE(got.empty());
    return;
  }
  ASSERT_EQ(int(got.size()), c.size());
  for (int r = 0; r < c.size(); ++r)
    EXPECT_EQ(std::string(got[size_t(r)].begin(), got[size_t(r)].end()),
              std::string(size_t(r) * 3, char('a' + r)));
}

}  // namespace communicator_timeline_test
}  // namespace mt
