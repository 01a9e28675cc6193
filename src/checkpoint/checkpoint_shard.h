// One model-parallel rank's model.safetensors inside a checkpoint iteration
// (<iter>/mp_rank_TT_PPP/model.safetensors, checkpoint_io.h): the one writer
// (save_checkpoint and `megatron convert` share it) and the reader that
// assembles a parameter's full tensor from the shards of whatever TP/PP layout
// saved it (re-sharding on load, and the export to Hugging Face).
//
// The file holds each parameter's local shard under its Megatron-core name;
// its metadata: "format" = "megatron.cpp", "params" = JSON {"<name>":
// {"global_shape", "partition_dim", ["row_blocks"]}}, and the shard's
// "tp_rank", "tp_size", "pp_rank", "pp_size".
//
// A training run's save leaves an MoE model's expert parameters
// (GradGroup::kExpertDataParallel) out of it: one EP rank's experts of one
// stage go to their own file (<iter>/mp_rank_00_PPP_EEE/model.safetensors,
// whole tensors under their global names, metadata as above with "tp_rank" 0,
// "tp_size" 1 (experts are not TP-split) and "ep_rank", "ep_size"), written
// once per expert-DP group. A file with the experts inside (ShardParams::kAll,
// as `convert` writes) is read as before: TP-replicated tensors.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kernels/precision.h"
#include "model/params.h"
#include "checkpoint/checkpoint_verify.h"

namespace mt {

// The local shard's shape: {rows} for vectors, {rows, cols} for matrices.
std::vector<int64_t> local_shape(const ParamSpec& p);

// Which parameters of the registry a model file holds: all of them, or the
// dense ones only (the experts then go to write_expert_shard's files).
enum class ShardParams : uint8_t { kAll, kDense };

// Parameters written in fp32 from host copies although the weights are bf16
// (registry offset -> values: bf16 runs' expert biases, kept fp32 as Megatron's).
using Fp32Copies = std::map<int64_t, std::vector<float>>;
Fp32Copies host_fp32_copies(const ParamRegistry& reg, const SavedWeights& w);

// Writes the parameters of `reg` (values in `params`, at each spec's
// offset; F32, or BF16 for a bf16 model's weights, as Megatron saves a bf16
// model) to `path` atomically, with the metadata above; TP coordinates come
// from reg.stage(), the pipeline ones are given. Returns the file's length and
// CRC-32C (for meta.json's "files").
FileChecksum write_model_shard(const std::string& path, const ParamRegistry& reg, ReadView params,
                               int pp_rank, int pp_size, ShardParams which = ShardParams::kAll,
                               const Fp32Copies* fp32 = nullptr);
// The expert parameters of `reg` (this EP rank's experts; EP coordinates from
// reg.stage()) into an expert directory's file.
FileChecksum write_expert_shard(const std::string& path, const ParamRegistry& reg,
                                ReadView params, int pp_rank, int pp_size,
                                const Fp32Copies* fp32 = nullptr);

// Reads one parameter's whole local tensor (numel floats) as the rank whose
// checkpoint directory is `rank_dir` saved it.
using ShardSource = std::function<void(const std::string& rank_dir, float* dst, int64_t numel)>;

// Assembles parameter p's full tensor (global_rows x global_cols floats, into
// `full`) from the saved_tp TP shards of pipeline stage saved_pp_rank of the
// iteration directory `iter_dir`: rows of a row-split tensor by
// p.global_row (row blocks too), columns of a column-split one side by side,
// a replicated tensor from TP rank 0.
void read_full_tensor(const std::string& iter_dir, const ShardSource& read, const ParamSpec& p,
                      int saved_tp, int saved_pp_rank, float* full);

// Where the experts of an MoE checkpoint saved with expert directories
// (meta.json's "expert_model_parallel_size" = saved_ep) are: the directory
// mp_rank_00_PPP_EEE whose model.safetensors holds each expert tensor, by its
// global name, over every saved stage and EP rank; so any EP loads any other.
class ExpertIndex {
 public:
  // Opens each expert file's header through `verifier`; a stage without MoE
  // layers has none, a file meta.json recorded must be there.
  ExpertIndex(const std::string& iter_dir, int saved_pp, int saved_ep,
              const CheckpointVerifier& verifier);
  // The expert directory holding tensor `name`; throws naming it if none does.
  const std::string& dir_of(const std::string& name) const;

 private:
  std::string iter_dir_;
  int saved_ep_;
  std::map<std::string, std::string> dir_of_;
};

// The saved pipeline stage that holds parameter p: `layer_stage` maps each
// (global) layer to its stage; the embeddings (and the tied output layer's
// copy) live on the first stage, the loss head on the last.
int saved_stage_of(const ParamSpec& p, int saved_pp, const std::vector<int>& layer_stage);

}  // namespace mt
