// megatron::ParallelState (include/megatron/parallel_state.h): comm/'s
// ParallelState, the one the training run builds, over an MpiEnv of its own.
#include "megatron/parallel_state.h"

#include <stdexcept>

#include "comm/mpi_env.h"
#include "comm/parallel_state.h"
#include "core/error.h"
#include "core/log.h"

namespace megatron {

namespace {

mt::ParallelConfig config_of(const ParallelSizes& l) {
  mt::ParallelConfig c;
  c.tp = l.tensor_parallel;
  c.pp = l.pipeline_parallel;
  c.vpp = l.virtual_pipeline;
  c.cp = l.context_parallel;
  c.ep = l.expert_parallel;
  return c;
}

mt::GroupKind kind_of(Group g) {
  switch (g) {
    case Group::kWorld: return mt::GroupKind::kWorld;
    case Group::kTensor: return mt::GroupKind::kTp;
    case Group::kContext: return mt::GroupKind::kCp;
    case Group::kData: return mt::GroupKind::kDp;
    case Group::kDataContext: return mt::GroupKind::kDpCp;
    case Group::kPipeline: return mt::GroupKind::kPp;
    case Group::kModel: return mt::GroupKind::kModelParallel;
    case Group::kExpert: return mt::GroupKind::kEp;
    case Group::kExpertData: return mt::GroupKind::kExpertDp;
  }
  throw std::invalid_argument("megatron::ParallelState: unknown Group " +
                              std::to_string(int(g)));
}

}  // namespace

int launcher_rank() { return mt::launcher_rank(); }

struct ParallelState::Impl {
  mt::MpiEnv mpi;  // first in, last out: the groups are freed before MPI finalises
  std::unique_ptr<mt::ParallelState> ps;
  const mt::Communicator& comm(Group g) const { return ps->comm(kind_of(g)); }
};

ParallelState::ParallelState(const ParallelSizes& sizes) : impl_(std::make_unique<Impl>()) {
  try {  // a misfit is refused before any communication, alike on every rank
    impl_->ps = std::make_unique<mt::ParallelState>(config_of(sizes));
  } catch (const mt::Error& e) {
    throw std::invalid_argument(e.what());
  }
}

ParallelState::~ParallelState() {
  if (impl_ == nullptr) return;
  impl_->ps.reset();
  impl_->mpi.finalize();
}

int ParallelState::rank(Group g) const { return impl_->comm(g).rank(); }
int ParallelState::size(Group g) const { return impl_->comm(g).size(); }

std::vector<int> ParallelState::group_ranks(Group g) const {
  const mt::Communicator& c = impl_->comm(g);
  std::vector<int> ranks;
  for (int r = 0; r < c.size(); ++r) ranks.push_back(c.world_rank_of(r));
  return ranks;
}

bool ParallelState::first_stage() const { return impl_->ps->pp_is_first_stage; }
bool ParallelState::last_stage() const { return impl_->ps->pp_is_last_stage; }
std::string ParallelState::describe() const { return impl_->ps->layout(); }

void ParallelState::all_reduce_sum(Group g, float* data, int64_t n) const {
  impl_->comm(g).all_reduce_sum(data, n);
}
void ParallelState::all_reduce_sum(Group g, double* data, int64_t n) const {
  impl_->comm(g).all_reduce_sum(data, n);
}
void ParallelState::all_reduce_max(Group g, float* data, int64_t n) const {
  impl_->comm(g).all_reduce_max(data, n);
}
void ParallelState::broadcast(Group g, void* data, int64_t bytes, int root) const {
  impl_->comm(g).broadcast(data, size_t(bytes), root);
}
void ParallelState::barrier(Group g) const { impl_->comm(g).barrier(); }

}  // namespace megatron
