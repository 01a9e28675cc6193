// The 1F1B schedule against Megatron-LM's order, written out by hand for
// small pipelines, plus the invariants every stage's list must satisfy.
#include "pipeline/schedules.h"

#include <gtest/gtest.h>

#include <map>

namespace mt {
namespace {

TEST(Schedule1F1B, TwoStagesFourMicroBatches) {
  // Stage 0: one warm-up forward, then F/B pairs, then the last backward.
  EXPECT_EQ(describe(schedule_1f1b(2, 0, 4)),
            "F0 SF0 F1 SF1 RB0 B0 F2 SF2 RB1 B1 F3 SF3 RB2 B2 RB3 B3");
  // Last stage: no warm-up, strictly alternating.
  EXPECT_EQ(describe(schedule_1f1b(2, 1, 4)),
            "RF0 F0 B0 SB0 RF1 F1 B1 SB1 RF2 F2 B2 SB2 RF3 F3 B3 SB3");
}

TEST(Schedule1F1B, FourStagesAndFewMicroBatches) {
  EXPECT_EQ(describe(schedule_1f1b(4, 0, 8)),
            "F0 SF0 F1 SF1 F2 SF2 F3 SF3 RB0 B0 F4 SF4 RB1 B1 F5 SF5 RB2 B2 F6 SF6 RB3 B3 "
            "F7 SF7 RB4 B4 RB5 B5 RB6 B6 RB7 B7");
  EXPECT_EQ(describe(schedule_1f1b(4, 2, 8)),
            "RF0 F0 SF0 RF1 F1 SF1 RB0 B0 SB0 RF2 F2 SF2 RB1 B1 SB1 RF3 F3 SF3 RB2 B2 SB2 "
            "RF4 F4 SF4 RB3 B3 SB3 RF5 F5 SF5 RB4 B4 SB4 RF6 F6 SF6 RB5 B5 SB5 RF7 F7 SF7 "
            "RB6 B6 SB6 RB7 B7 SB7");
  // Fewer micro-batches than stages: all forwards, then all backwards.
  EXPECT_EQ(describe(schedule_1f1b(4, 0, 2)), "F0 SF0 F1 SF1 RB0 B0 RB1 B1");
}

TEST(Schedule1F1B, OneStageIsGradientAccumulation) {
  EXPECT_EQ(describe(schedule_1f1b(1, 0, 3)), "F0 B0 F1 B1 F2 B2");
}

TEST(Schedule1F1B, InvariantsForManyShapes) {
  for (int stages : {1, 2, 3, 4, 8})
    for (int64_t m : {1, 2, 3, 4, 8, 16})
      for (int rank = 0; rank < stages; ++rank) {
        const auto ops = schedule_1f1b(stages, rank, m);
        std::map<int64_t, int> forward_at, backward_at;
        int64_t in_flight = 0, peak = 0, next_f = 0, next_b = 0;
        for (int i = 0; i < int(ops.size()); ++i) {
          const PipeOp& op = ops[size_t(i)];
          if (op.step == PipeStep::kForward) {
            EXPECT_EQ(op.micro_batch, next_f++);  // forwards in order
            forward_at[op.micro_batch] = i;
            peak = std::max(peak, ++in_flight);
          }
          if (op.step == PipeStep::kBackward) {
            EXPECT_EQ(op.micro_batch, next_b++);  // backwards in order
            EXPECT_TRUE(forward_at.count(op.micro_batch));
            backward_at[op.micro_batch] = i;
            --in_flight;
          }
          if (op.step == PipeStep::kRecvForward || op.step == PipeStep::kSendBackward) {
            EXPECT_GT(rank, 0);
          }
          if (op.step == PipeStep::kSendForward || op.step == PipeStep::kRecvBackward) {
            EXPECT_LT(rank, stages - 1);
          }
        }
        EXPECT_EQ(next_f, m);
        EXPECT_EQ(next_b, m);
        EXPECT_EQ(peak, max_in_flight_1f1b(stages, rank, m))
            << "stages " << stages << " rank " << rank << " m " << m;
      }
}

}  // namespace
}  // namespace mt
