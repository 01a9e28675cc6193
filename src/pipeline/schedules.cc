#include "pipeline/schedules.h"

#include <algorithm>

#include "backend/device.h"
#include "core/error.h"
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
    s += names[int(op.step)];
    s += std::to_string(op.micro_batch);
    if (op.chunk != 0) {
      s += '.';
      s += std::to_string(op.chunk);
    }
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

namespace {

int64_t interleaved_warmup(int stages, int rank, int chunks, int64_t m) {
  const int64_t total = m * chunks;
  if (m == stages) return total;  // Megatron: all warm-up
  return std::min<int64_t>((stages - rank - 1) * 2 + int64_t(chunks - 1) * stages, total);
}

}  // namespace

std::vector<PipeOp> schedule_interleaved(int stages, int rank, int chunks, int64_t m) {
  MT_CHECK(m % stages == 0, "the interleaved schedule needs the micro-batches per step (", m,
           ") to be divisible by --pipeline-model-parallel-size ", stages,
           "; fix: change --global-batch-size or --micro-batch-size");
  const int64_t group = int64_t(stages) * chunks, total = m * chunks;
  const int64_t warmup = interleaved_warmup(stages, rank, chunks, m);
  auto micro_batch = [&](int64_t k) { return (k / group) * stages + k % stages; };
  std::vector<PipeOp> ops;
  auto forward = [&](int64_t k) {
    const int c = int((k % group) / stages);
    const int64_t j = micro_batch(k);
    if (!(rank == 0 && c == 0)) ops.push_back({PipeStep::kRecvForward, j, c});
    ops.push_back({PipeStep::kForward, j, c});
    if (!(rank == stages - 1 && c == chunks - 1)) ops.push_back({PipeStep::kSendForward, j, c});
  };
  auto backward = [&](int64_t k) {
    const int c = chunks - 1 - int((k % group) / stages);
    const int64_t j = micro_batch(k);
    if (!(rank == stages - 1 && c == chunks - 1)) ops.push_back({PipeStep::kRecvBackward, j, c});
    ops.push_back({PipeStep::kBackward, j, c});
    if (!(rank == 0 && c == 0)) ops.push_back({PipeStep::kSendBackward, j, c});
  };
  for (int64_t k = 0; k < warmup; ++k) forward(k);
  for (int64_t k = warmup; k < total; ++k) {
    forward(k);
    backward(k - warmup);
  }
  for (int64_t k = total - warmup; k < total; ++k) backward(k);
  return ops;
}

int64_t max_in_flight_interleaved(int stages, int rank, int chunks, int64_t m) {
  // Every forward step before a chunk's backward may be that chunk's.
  return std::min<int64_t>(interleaved_warmup(stages, rank, chunks, m) + 1, m);
}

std::vector<PipeOp> schedule_forward_only(int stages, int rank, int chunks, int64_t m) {
  std::vector<PipeOp> ops;
  for (int64_t j = 0; j < m; ++j)
    for (int c = 0; c < chunks; ++c) {
      if (!(rank == 0 && c == 0)) ops.push_back({PipeStep::kRecvForward, j, c});
      ops.push_back({PipeStep::kForward, j, c});
      if (!(rank == stages - 1 && c == chunks - 1)) ops.push_back({PipeStep::kSendForward, j, c});
    }
  return ops;
}

std::vector<PipeOp> training_schedule(int stages, int rank, int chunks, int64_t m) {
  return chunks > 1 ? schedule_interleaved(stages, rank, chunks, m) : schedule_1f1b(stages, rank, m);
}

double run_pipeline_schedule(ModelRuntime& rt, const PipelineLinks& links,
                             const std::vector<PipeOp>& ops, const PassContext& ctx,
                             const MicroBatchFn& next,
                             const std::function<void(int64_t)>* grads_ready,
                             double* wait_seconds, bool every_micro_batch) {
  const int64_t n = rt.boundary_elements();  // one boundary activation (s_local, b, h)
  const int stages = links.stages;
  const int next_rank = (links.stage + 1) % stages, prev_rank = (links.stage + stages - 1) % stages;
  int64_t m = 0;
  for (const PipeOp& op : ops) m = std::max(m, op.micro_batch + 1);
  // Tags name the receiving chunk, so each (peer, chunk) pair is its own
  // in-order stream: chunk c of the last stage feeds chunk c + 1 of the first.
  auto fwd_tag = [&](int receiver_chunk) { return kTagForward * 64 + receiver_chunk; };
  auto bwd_tag = [&](int receiver_chunk) { return kTagBackward * 64 + receiver_chunk; };
  // Per (chunk, slot): the pending send of its output activation and of its
  // input gradient, waited on before the slot's buffers are reused.
  const size_t slots = rt.slots_per_chunk();
  std::vector<CommHandle> fwd_sends(size_t(rt.num_chunks()) * slots);
  std::vector<CommHandle> bwd_sends(fwd_sends.size());
  double loss = 0;
  // Each step's span on the timeline (null or not recording: nothing): the
  // receive spans cover exactly what *wait_seconds counts (the logged bubble).
  Timeline* tl = links.pp->timeline();
  for (const PipeOp& op : ops) {
    const SpanArgs at{.micro_batch = int32_t(op.micro_batch), .chunk = op.chunk};
    const size_t i = size_t(op.micro_batch) % slots;
    CommHandle& fwd_send = fwd_sends[size_t(op.chunk) * slots + i];
    CommHandle& bwd_send = bwd_sends[size_t(op.chunk) * slots + i];
    switch (op.step) {
      case PipeStep::kRecvForward: {
        fwd_send.wait();
        bwd_send.wait();
        TimelineSpan span(tl, TimelineKind::kPipeRecv, "recv forward", at);
        Timer t;
        visit(rt.stage_input(op.chunk, i),
              [&](auto* x) { links.pp->recv(x, n, prev_rank, fwd_tag(op.chunk)); });
        *wait_seconds += t.seconds();
        break;
      }
      case PipeStep::kForward: {
        fwd_send.wait();
        bwd_send.wait();
        TimelineSpan span(tl, TimelineKind::kForward, "forward", at);
        loss += rt.forward(op.chunk, i, op.micro_batch, next, ctx);
        break;
      }
      case PipeStep::kSendForward: {
        const int receiver_chunk = links.stage == stages - 1 ? op.chunk + 1 : op.chunk;
        TimelineSpan span(tl, TimelineKind::kPipeSend, "send forward", at);
        fwd_send = visit(ReadView(rt.stage_output(op.chunk, i)), [&](const auto* x) {
          return links.pp->isend(x, n, next_rank, fwd_tag(receiver_chunk));
        });
        break;
      }
      case PipeStep::kRecvBackward: {
        TimelineSpan span(tl, TimelineKind::kPipeRecv, "recv backward", at);
        Timer t;
        links.pp->recv(rt.input_grad(), n, next_rank, bwd_tag(op.chunk));
        *wait_seconds += t.seconds();
        break;
      }
      case PipeStep::kBackward: {
        PassContext c = ctx;
        c.grads_ready = every_micro_batch || op.micro_batch + 1 == m ? grads_ready : nullptr;
        TimelineSpan span(tl, TimelineKind::kBackward, "backward", at);
        rt.backward(op.chunk, i, c);
        break;
      }
      case PipeStep::kSendBackward: {
        // Sent (fp32, as every gradient) from the slot's record, which backward
        // no longer needs: the shared input_grad() is overwritten by the next backward.
        const int receiver_chunk = links.stage == 0 ? op.chunk - 1 : op.chunk;
        TimelineSpan span(tl, TimelineKind::kPipeSend, "send backward", at);
        float* buf = rt.grad_send_buffer(op.chunk, i);
        copy_bytes(buf, rt.input_grad(), size_t(n) * sizeof(float));
        bwd_send = links.pp->isend(buf, n, prev_rank, bwd_tag(receiver_chunk));
        break;
      }
    }
  }
  for (CommHandle& h : fwd_sends) h.wait();
  for (CommHandle& h : bwd_sends) h.wait();
  return loss;
}

}  // namespace mt
