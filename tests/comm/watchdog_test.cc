// The communication watchdog's bookkeeping (dist/watchdog.h); that a stopped
// peer ends a job is tested end to end in tests/cli/comm_timeout_test.cc.
#include "comm/watchdog.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace mt {
namespace watchdog_test {

TEST(Watchdog, DescribesMembersAndAbbreviatesLargeGroups) {
  const std::vector<int> two = {0, 2};
  EXPECT_EQ(describe_members(two.data(), 2), "world ranks 0,2");
  std::vector<int> many(40);
  for (int i = 0; i < 40; ++i) many[size_t(i)] = 2 * i;
  EXPECT_EQ(describe_members(many.data(), 40), "world ranks 0,2,4,6,8,10,12,14,... (40 ranks)");
}

TEST(Watchdog, MessageNamesOperationGroupPeerAndFlag) {
  const GroupId dp{"dp", "world ranks 1,3"};
  const std::string m = timeout_message(6.3, 6.0, "recv", &dp, 3);
  EXPECT_NE(m.find("no progress for 6.3 s in recv from world rank 3 on group 'dp' "
                   "(world ranks 1,3)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("--distributed-timeout-minutes 0.1 = 6.0 s"), std::string::npos) << m;
  EXPECT_NE(m.find("fix:"), std::string::npos) << m;
  const std::string s = timeout_message(7, 6, "isend", &dp, 1);
  EXPECT_NE(s.find("isend to world rank 1"), std::string::npos) << s;
}

TEST(Watchdog, RecordsTheLongestCompletedWaitOfOuterScopesOnly) {
  CommWatchdog off(0);  // resets the record; no thread
  const GroupId tp{"tp", "world ranks 0,1"};
  {
    WaitScope w("all_reduce", &tp);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  const CompletedWait first = longest_completed_wait();
  EXPECT_GE(first.seconds, 0.03);
  EXPECT_LT(first.seconds, 5.0);
  EXPECT_EQ(first.where, "all_reduce on group 'tp' (world ranks 0,1)");
  {
    WaitScope outer("barrier", &tp);
    {
      WaitScope inner("recv", &tp, 1);  // nested: the outer wait goes on
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
  }
  EXPECT_EQ(longest_completed_wait().where, "barrier on group 'tp' (world ranks 0,1)");
  EXPECT_GE(longest_completed_wait().seconds, 0.06);
}

TEST(Watchdog, DoesNotFireOnWaitsShorterThanTheTimeout) {
  CommWatchdog dog(0.5);
  const GroupId dp{"dp", "world ranks 0,1"};
  for (int i = 0; i < 5; ++i) {
    WaitScope w("all_reduce", &dp);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // idle: no wait is open
  EXPECT_EQ(dog.timeout_seconds(), 0.5);
}

}  // namespace watchdog_test
}  // namespace mt
