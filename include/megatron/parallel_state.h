// megatron/parallel_state.h — the parallel layout of an MPI world, as
// Megatron core's parallel_state gives it: where this rank sits in the
// tensor x context x data x pipeline mesh (and the expert mesh of an MoE
// model), the world ranks of each of its groups, and the collectives a
// program's own code needs over them.
//
// Rank order tp-cp-dp-pp, TP fastest (Megatron-LM's RankGenerator): with
// TP = 2, PP = 2 on 8 ranks (DP = 2), the tensor groups are {0,1} {2,3} {4,5}
// {6,7}, the data groups {0,2} {1,3} {4,6} {5,7}, the pipeline groups {0,4}
// {1,5} {2,6} {3,7}. Expert groups re-read one stage's TP x CP x DP ranks as
// EP x expert-DP, EP fastest. These are the groups megatron::Trainer trains
// over for the same sizes.
//
// MPI: the state initialises MPI unless the program has, and finalises it when
// destroyed (so a process holds one unless it initialises MPI itself).
//
//   megatron::ParallelState ps({.tensor_parallel = 2});
//   float x = 1;
//   ps.all_reduce_sum(megatron::Group::kTensor, &x, 1);  // x = 2 on every rank
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace megatron {

// The sizes of a layout; the data-parallel size is what is left of the world:
// world / (tensor x context x pipeline).
struct ParallelSizes {
  int tensor_parallel = 1;    // --tensor-model-parallel-size
  int pipeline_parallel = 1;  // --pipeline-model-parallel-size
  int virtual_pipeline = 1;   // model chunks per pipeline rank (interleaved 1F1B)
  int context_parallel = 1;   // --context-parallel-size
  int expert_parallel = 1;    // --expert-model-parallel-size (of tensor x context x data)
};

enum class Group {
  kWorld,
  kTensor,       // same context, data and pipeline coordinates
  kContext,      // same tensor, data and pipeline coordinates
  kData,         // same tensor, context and pipeline coordinates (the data loader's)
  kDataContext,  // data x context: gradients are averaged and the optimizer shards here
  kPipeline,     // same tensor, context and data coordinates, by stage
  kModel,        // tensor x pipeline (same context and data coordinates)
  kExpert,       // MoE: the ranks holding different experts (a token exchange)
  kExpertData,   // MoE: the replicas of the same experts
};

// This process's world rank as its launcher (mpirun, srun) numbered it, read
// from the environment without starting MPI; 0 when launched alone. (Say a
// refusal once, on rank 0, before any collective call.)
int launcher_rank();

class ParallelState {
 public:
  // Collective over the MPI world (every rank with the same sizes). Throws
  // std::invalid_argument, naming the sizes and the fix, when the world does
  // not split into them (before any communication).
  explicit ParallelState(const ParallelSizes& sizes);
  ~ParallelState();
  ParallelState(const ParallelState&) = delete;
  ParallelState& operator=(const ParallelState&) = delete;

  // This rank's index in its group of `group`, and the group's size.
  int rank(Group group) const;
  int size(Group group) const;
  // The world ranks of this rank's group, in group-rank order.
  std::vector<int> group_ranks(Group group) const;
  bool first_stage() const;  // pipeline
  bool last_stage() const;
  // "TP(2)-PP(1)-DP(2)" (with "-CP(n)" after TP when CP > 1), as run logs print it.
  std::string describe() const;

  // Collectives over this rank's group of `group` (every member calls them).
  void all_reduce_sum(Group group, float* data, int64_t n) const;
  void all_reduce_sum(Group group, double* data, int64_t n) const;
  void all_reduce_max(Group group, float* data, int64_t n) const;
  // `bytes` from the group's rank `root` to the others.
  void broadcast(Group group, void* data, int64_t bytes, int root) const;
  void barrier(Group group) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace megatron
