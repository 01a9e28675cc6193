// The 1F1B schedule against Megatron-LM's order, written out by hand for
// small pipelines, plus the invariants every stage's list must satisfy.
#include "pipeline/schedules.h"

#include <gtest/gtest.h>

#include <map>
#include <tuple>
#include <vector>

#include "core/error.h"

namespace mt {
namespace schedules_test {

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

TEST(ScheduleInterleaved, TwoStagesTwoChunksFourMicroBatches) {
  // Virtual step k runs chunk (k mod 4) / 2 on micro-batch (k / 4)·2 + k mod 2;
  // warm-up: stage 0 (2−0−1)·2 + (2−1)·2 = 4 steps, stage 1 2 steps.
  EXPECT_EQ(describe(schedule_interleaved(2, 0, 2, 4)),
            "F0 SF0 F1 SF1 RF0.1 F0.1 SF0.1 RF1.1 F1.1 SF1.1 "
            "F2 SF2 RB0.1 B0.1 SB0.1 F3 SF3 RB1.1 B1.1 SB1.1 "
            "RF2.1 F2.1 SF2.1 RB0 B0 RF3.1 F3.1 SF3.1 RB1 B1 "
            "RB2.1 B2.1 SB2.1 RB3.1 B3.1 SB3.1 RB2 B2 RB3 B3");
  EXPECT_EQ(describe(schedule_interleaved(2, 1, 2, 4)),
            "RF0 F0 SF0 RF1 F1 SF1 "
            "RF0.1 F0.1 B0.1 SB0.1 RF1.1 F1.1 B1.1 SB1.1 "
            "RF2 F2 SF2 RB0 B0 SB0 RF3 F3 SF3 RB1 B1 SB1 "
            "RF2.1 F2.1 B2.1 SB2.1 RF3.1 F3.1 B3.1 SB3.1 RB2 B2 SB2 RB3 B3 SB3");
  EXPECT_THROW(schedule_interleaved(2, 0, 2, 3), Error);  // m must divide by P
}

// Runs every stage's op list against the others, with sends that never block
// and receives that wait for the matching send (same peer and stream), as the
// executor does; fails on a deadlock or an unmatched message.
void expect_runs_to_completion(int stages, int chunks, int64_t m, bool interleaved) {
  std::vector<std::vector<PipeOp>> ops(static_cast<size_t>(stages));
  for (int r = 0; r < stages; ++r)
    ops[size_t(r)] = interleaved ? schedule_interleaved(stages, r, chunks, m)
                                 : schedule_1f1b(stages, r, m);
  // Message streams keyed by (to, kind, receiving chunk): FIFO of micro-batches.
  std::map<std::tuple<int, int, int>, std::vector<int64_t>> sent;
  std::map<std::tuple<int, int, int>, size_t> consumed;
  std::vector<size_t> pc(static_cast<size_t>(stages), 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < stages; ++r) {
      while (pc[size_t(r)] < ops[size_t(r)].size()) {
        const PipeOp& op = ops[size_t(r)][pc[size_t(r)]];
        if (op.step == PipeStep::kSendForward) {
          const int to = (r + 1) % stages, c = r == stages - 1 ? op.chunk + 1 : op.chunk;
          sent[{to, 0, c}].push_back(op.micro_batch);
        } else if (op.step == PipeStep::kSendBackward) {
          const int to = (r + stages - 1) % stages, c = r == 0 ? op.chunk - 1 : op.chunk;
          sent[{to, 1, c}].push_back(op.micro_batch);
        } else if (op.step == PipeStep::kRecvForward || op.step == PipeStep::kRecvBackward) {
          const auto key = std::make_tuple(r, op.step == PipeStep::kRecvForward ? 0 : 1, op.chunk);
          size_t& next = consumed[key];
          if (next >= sent[key].size()) break;  // blocked
          EXPECT_EQ(sent[key][next], op.micro_batch) << "out-of-order message to stage " << r;
          ++next;
        }
        ++pc[size_t(r)];
        progress = true;
      }
    }
  }
  for (int r = 0; r < stages; ++r)
    EXPECT_EQ(pc[size_t(r)], ops[size_t(r)].size())
        << "deadlock: stage " << r << " of " << stages << ", chunks " << chunks << ", m " << m;
  for (const auto& [key, msgs] : sent) EXPECT_EQ(consumed[key], msgs.size()) << "unreceived";
}

TEST(Schedules, EveryStageRunsToCompletionWithoutDeadlock) {
  for (int stages : {2, 3, 4})
    for (int64_t m : {1, 2, 4, 8}) expect_runs_to_completion(stages, 1, m, false);
  for (int stages : {2, 4})
    for (int chunks : {2, 3})
      for (int64_t m : {int64_t(stages), int64_t(2 * stages), int64_t(4 * stages)})
        expect_runs_to_completion(stages, chunks, m, true);
}

TEST(ScheduleInterleaved, ForwardBeforeBackwardPerChunkAndSlotsSuffice) {
  for (int stages : {2, 4})
    for (int chunks : {2, 4})
      for (int64_t m : {int64_t(stages), int64_t(3 * stages)})
        for (int rank = 0; rank < stages; ++rank) {
          std::map<std::pair<int, int64_t>, bool> done_forward;
          std::map<int, int64_t> in_flight, peak;
          for (const PipeOp& op : schedule_interleaved(stages, rank, chunks, m)) {
            const auto key = std::make_pair(op.chunk, op.micro_batch);
            if (op.step == PipeStep::kForward) {
              done_forward[key] = true;
              peak[op.chunk] = std::max(peak[op.chunk], ++in_flight[op.chunk]);
            }
            if (op.step == PipeStep::kBackward) {
              EXPECT_TRUE(done_forward[key]);
              --in_flight[op.chunk];
            }
          }
          for (const auto& [c, p] : peak)
            EXPECT_LE(p, max_in_flight_interleaved(stages, rank, chunks, m));
        }
}

}  // namespace schedules_test
}  // namespace mt
