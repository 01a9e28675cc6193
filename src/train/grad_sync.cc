#include "train/grad_sync.h"

#include <string>


namespace mt {

namespace {
const char* kWordEmbedding = "embedding.word_embeddings.weight";
}  // namespace

GradSync::GradSync(const ModelRuntime& rt, const ParallelState& ps, int64_t bucket_size_floats,
                   bool overlap)
    : rt_(rt), ps_(ps) {
  buckets_ = std::make_unique<GradBuckets>(rt.reg, rt.grads, ps.dp_comm, bucket_size_floats,
                                           overlap);
  // Parts as the model reports them: -1 embedding, l for decoder layer l,
  // total_layers for the final norm.
  const int64_t total = rt.sh.total_layers;
  params_of_part_.resize(size_t(total + 2));
  const auto& params = rt.reg.params();
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string& name = params[i].name;
    int64_t part = -1;
    if (name.rfind("decoder.layers.", 0) == 0)
      part = std::stoll(name.substr(15));
    else if (name.rfind("decoder.final_layernorm", 0) == 0)
      part = total;
    params_of_part_[size_t(part + 1)].push_back(i);
  }
  part_done_.assign(params_of_part_.size(), false);
  hook_ = [this](int64_t part) { part_ready(part); };
}

void GradSync::part_ready(int64_t part) {
  const size_t slot = size_t(part + 1);
  if (part_done_[slot]) return;
  part_done_[slot] = true;
  if (rt_.sh.tp.sequence_parallel) {
    for (size_t i : params_of_part_[slot]) {
      const ParamSpec& p = rt_.reg.params()[i];
      if (p.tp_replicated()) ps_.tp_comm.all_reduce_sum(rt_.grads + p.offset, p.numel());
    }
  }
  for (size_t i : params_of_part_[slot]) buckets_->mark_ready(i);
}

void GradSync::finish() {
  for (int64_t part = int64_t(part_done_.size()) - 2; part >= -1; --part) part_ready(part);
  buckets_->finish();
  part_done_.assign(part_done_.size(), false);
  // Tied input/output embedding on different stages: the first and the last
  // stage each hold a copy; summing their gradients keeps the copies equal.
  if (ps_.pp_size > 1 && ps_.embd_comm.size() > 1 && rt_.reg.has(kWordEmbedding)) {
    const ParamSpec& p = rt_.reg.get(kWordEmbedding);
    ps_.embd_comm.all_reduce_sum(rt_.grads + p.offset, p.numel());
  }
}

double GradSync::comm_seconds() const {
  // Blocking calls are timed by the communicators themselves; overlapped
  // buckets by the time spent launching, testing and waiting on them.
  return ps_.tp_comm.busy_seconds() + ps_.dp_comm.busy_seconds() + ps_.embd_comm.busy_seconds() +
         (buckets_->overlap() ? buckets_->comm_seconds() : 0.0);
}

void GradSync::reset_timers() {
  ps_.tp_comm.reset_busy_seconds();
  ps_.dp_comm.reset_busy_seconds();
  ps_.embd_comm.reset_busy_seconds();
  buckets_->reset_timers();
}

}  // namespace mt
