// Pipeline schedules as Megatron-LM runs them, over the stages of a pipeline
// (the pp group: stage i is pp_comm rank i). A schedule is first built as a
// list of steps (so it can be checked against Megatron's order in a test),
// then executed: receives block, sends are non-blocking (isend) and waited on
// before their buffer is reused, which makes 1F1B deadlock-free. The executor
// owns the communication between stages and drives the model only through
// ModelRuntime's stage interface (model/model_runtime.h): it knows no GPT.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "model/model_runtime.h"

namespace mt {

enum class PipeStep : uint8_t {
  kRecvForward,   // activation of micro-batch k from the previous stage
  kForward,
  kSendForward,   // activation of k to the next stage
  kRecvBackward,  // gradient of k's output from the next stage
  kBackward,
  kSendBackward,  // gradient of k's input to the previous stage
};

struct PipeOp {
  PipeStep step;
  int64_t micro_batch;
  int chunk = 0;  // model chunk (virtual stage) of this rank
  bool operator==(const PipeOp&) const = default;
};

// "F3", "RB0", ... for tests and logs; a chunk other than 0 adds ".c" ("F3.1").
std::string describe(const std::vector<PipeOp>& ops);

// Megatron's 1F1B (forward_backward_pipelining_without_interleaving) for stage
// `rank` of `stages`: warm-up of min(stages − rank − 1, m) forwards, then one
// forward / one backward in steady state, then the cool-down backwards. No
// receive on the first stage, no send on the last. With one stage it is
// Megatron's forward_backward_no_pipelining (F0 B0 F1 B1 ...: gradient
// accumulation).
std::vector<PipeOp> schedule_1f1b(int stages, int rank, int64_t num_micro_batches);

// Most micro-batches a stage holds activations for under 1F1B.
int64_t max_in_flight_1f1b(int stages, int rank, int64_t num_micro_batches);

// Megatron's interleaved 1F1B (forward_backward_pipelining_with_interleaving)
// with `chunks` model chunks per rank: virtual step k runs chunk
// (k mod P·v) / P (reversed for backward) on micro-batch (k / P·v)·P + k mod P;
// warm-up of (P − rank − 1)·2 + (v − 1)·P steps (all steps when m == P).
// Needs m divisible by P, as Megatron does.
std::vector<PipeOp> schedule_interleaved(int stages, int rank, int chunks,
                                         int64_t num_micro_batches);
// Activation records per chunk the interleaved schedule needs at most.
int64_t max_in_flight_interleaved(int stages, int rank, int chunks, int64_t num_micro_batches);

// Forward only (evaluation): each micro-batch through every chunk in order.
std::vector<PipeOp> schedule_forward_only(int stages, int rank, int chunks,
                                          int64_t num_micro_batches);

struct PipelineLinks {
  const Communicator* pp = nullptr;  // the pipeline group, ranks ordered by stage
  int stage = 0, stages = 1;
  bool first() const { return stage == 0; }
  bool last() const { return stage == stages - 1; }
};

// Runs `ops` for one iteration over rt's chunks; activations flow from chunk
// c of stage P − 1 to chunk c + 1 of stage 0. Micro-batch k uses slot
// k mod rt.slots_per_chunk() of its chunk. Returns the sum of token losses
// (the rank with the last chunk; 0 elsewhere). `grads_ready` is passed to each
// chunk's backward of the last micro-batch (every_micro_batch: of every one). With ctx.training false only
// forwards run and no gradients are touched. Seconds blocked in receives are
// added to *wait_seconds. Every send has finished when it returns.
double run_pipeline_schedule(ModelRuntime& rt, const PipelineLinks& links,
                             const std::vector<PipeOp>& ops, const PassContext& ctx,
                             const MicroBatchFn& next,
                             const std::function<void(int64_t)>* grads_ready,
                             double* wait_seconds, bool every_micro_batch = false);

// The schedule this rank runs for training: interleaved with several chunks,
// else 1F1B (which is no pipelining with one stage).
std::vector<PipeOp> training_schedule(int stages, int rank, int chunks, int64_t num_micro_batches);

}  // namespace mt
