#include "pipeline/schedules.h"

#include <algorithm>
#include <cstring>

#include "core/log.h"

namespace mt {

namespace {
constexpr int kTagForward = 11, kTagBackward = 12;
}  // namespace

std::string describe(const std::vector<PipeOp>& ops) {
  static const char* names[] = {"RF", "F", "SF", "RB", "B", "SB"};
  std::string s;
  for (const PipeOp& op : ops) {
    if (!s.empty()) s += ' ';
    s += names[int(op.step)] + std::to_string(op.micro_batch);
  }
  return s;
}

std::vector<PipeOp> schedule_1f1b(int stages, int rank, int64_t m) {
  const bool first = rank == 0, last = rank == stages - 1;
  const int64_t warmup = std::min<int64_t>(stages - rank - 1, m);
  std::vector<PipeOp> ops;
  auto forward = [&](int64_t k) {
    if (!first) ops.push_back({PipeStep::kRecvForward, k});
    ops.push_back({PipeStep::kForward, k});
    if (!last) ops.push_back({PipeStep::kSendForward, k});
  };
  auto backward = [&](int64_t k) {
    if (!last) ops.push_back({PipeStep::kRecvBackward, k});
    ops.push_back({PipeStep::kBackward, k});
    if (!first) ops.push_back({PipeStep::kSendBackward, k});
  };
  for (int64_t k = 0; k < warmup; ++k) forward(k);
  for (int64_t k = warmup; k < m; ++k) {  // steady state: F(k), B(k − warmup)
    forward(k);
    backward(k - warmup);
  }
  for (int64_t k = m - warmup; k < m; ++k) backward(k);  // cool-down
  return ops;
}

int64_t max_in_flight_1f1b(int stages, int rank, int64_t m) {
  return std::min<int64_t>(stages - rank, m);
}

double run_pipeline_schedule(ModelRuntime& rt, const PipelineLinks& links,
                             const std::vector<PipeOp>& ops, const PassContext& ctx,
                             const MicroBatchFn& next,
                             const std::function<void(int64_t)>* grads_ready,
                             double* wait_seconds) {
  const GptShapes& sh = rt.sh;
  const int64_t n = sh.local_tokens() * sh.h;  // one boundary activation (s_local, b, h)
  const size_t slots = rt.slots.size();
  int64_t m = 0;
  for (const PipeOp& op : ops) m = std::max(m, op.micro_batch + 1);
  // Pending sends per slot: a slot's output activation and its input gradient
  // (kept in the slot's layer-0 input buffer, which backward no longer needs).
  std::vector<CommHandle> fwd_sends(slots), bwd_sends(slots);
  double loss = 0;
  for (const PipeOp& op : ops) {
    const size_t i = size_t(op.micro_batch) % slots;
    MicroBatchSlot& s = rt.slots[i];
    float* input = s.act.hidden;                               // layer-0 input
    float* output = s.act.hidden + sh.num_layers * n;          // last layer's output
    switch (op.step) {
      case PipeStep::kRecvForward: {
        fwd_sends[i].wait();
        bwd_sends[i].wait();
        Timer t;
        links.pp->recv(input, n, links.stage - 1, kTagForward);
        *wait_seconds += t.seconds();
        break;
      }
      case PipeStep::kForward: {
        fwd_sends[i].wait();
        if (links.first()) bwd_sends[i].wait();
        s.act.sample0 = next(op.micro_batch, s.tokens.data(), s.labels.data());
        loss += gpt_forward(rt.w, &rt.g, s.act, rt.ws, sh, s.tokens.data(), s.labels.data(), ctx);
        break;
      }
      case PipeStep::kSendForward:
        fwd_sends[i] = links.pp->isend(output, n, links.stage + 1, kTagForward);
        break;
      case PipeStep::kRecvBackward: {
        Timer t;
        links.pp->recv(rt.ws.dres, n, links.stage + 1, kTagBackward);
        *wait_seconds += t.seconds();
        break;
      }
      case PipeStep::kBackward: {
        PassContext c = ctx;
        c.grads_ready = op.micro_batch + 1 == m ? grads_ready : nullptr;
        gpt_backward(rt.w, rt.g, s.act, rt.ws, sh, c);
        break;
      }
      case PipeStep::kSendBackward:
        std::memcpy(input, rt.ws.dres, size_t(n) * sizeof(float));
        bwd_sends[i] = links.pp->isend(input, n, links.stage - 1, kTagBackward);
        break;
    }
  }
  for (size_t i = 0; i < slots; ++i) {
    fwd_sends[i].wait();
    bwd_sends[i].wait();
  }
  return loss;
}

double forward_only_pipelined(ModelRuntime& rt, const PipelineLinks& links,
                              int64_t num_micro_batches, const PassContext& ctx,
                              const MicroBatchFn& next) {
  const GptShapes& sh = rt.sh;
  const int64_t n = sh.local_tokens() * sh.h;
  MicroBatchSlot& s = rt.slots[0];
  double loss = 0;
  for (int64_t k = 0; k < num_micro_batches; ++k) {
    if (!links.first()) links.pp->recv(s.act.hidden, n, links.stage - 1, kTagForward);
    s.act.sample0 = next(k, s.tokens.data(), s.labels.data());
    loss += gpt_forward(rt.w, nullptr, s.act, rt.ws, sh, s.tokens.data(), s.labels.data(), ctx);
    if (!links.last()) links.pp->send(s.act.hidden + sh.num_layers * n, n, links.stage + 1, kTagForward);
  }
  return loss;
}

}  // namespace mt
