// Saving and loading a training run (DESIGN.md "Checkpoints"):
//   <dir>/iter_0000010/mp_rank_TT_PPP/model.safetensors      this TP/PP rank's parameters
//   <dir>/iter_0000010/mp_rank_TT_PPP/optim_dp_DDD.safetensors  Adam moments (per DP shard)
//                                                                (and bf16 runs' fp32 main weights)
//   <dir>/iter_0000010/mp_rank_00_PPP_EEE/model.safetensors   MoE: the experts of EP rank EEE
//   <dir>/iter_0000010/mp_rank_00_PPP_EEE/optim_edp_DDD.safetensors  their Adam moments
//                                                              (per expert-DP shard)
//   <dir>/iter_0000010/meta.json                               iteration, data position, args,
//                                                              every file's length and CRC-32C
//   <dir>/latest_checkpointed_iteration.txt                    written last, atomically
// A checkpoint is written into iter_N.tmp and renamed only after every rank has
// finished, so a crash mid-save never leaves one that looks complete.
//
// model.safetensors holds the model's weights as it stores them: F32, or BF16
// in bf16 runs (as Megatron saves a bf16 model). The fp32 main weights of a
// bf16 run are optimizer state, saved beside the moments as main_param.<name>.
//
// Optimizer state (optim_dp_DDD.safetensors, metadata "steps" = the step count):
//  - plain AdamW: DP rank 0 writes optim_dp_000 with whole tensors
//    exp_avg.<name> and exp_avg_sq.<name> in the parameter's local shape;
//  - distributed optimizer: every DP rank writes its own optim_dp_DDD with
//    only the slices it owns: exp_avg.<name> and exp_avg_sq.<name> are 1-D,
//    elements [begin, end) of the parameter's local tensor flattened
//    row-major, given by the metadata "slices" = JSON {"<name>": [begin, end]}
//    (also "dp_rank", "dp_size"). A file without "slices" holds whole tensors,
//    so the plain file is the special case of one file with whole parameters.
// Loading assembles each parameter's whole local m and v (and main weights)
// from the slices of all optim_dp_* files of the mp_rank dir (they must cover
// every element), then re-shards over TP/PP as for the parameters and keeps
// what this rank's optimizer owns: any saved DP size loads at any DP size,
// plain or sharded.
//
// Experts (MoE): an mp_rank dir holds the dense parameters only. The experts
// of EP rank e on stage p (whole tensors under their global names, Megatron's
// legacy EP suffix on the directory) are written once, by that EP rank's
// expert-DP rank 0; their optimizer state as above with expert-DP in place of
// DP (optim_edp_DDD; slices with "edp_rank", "edp_size"). meta.json records
// "expert_model_parallel_size". Loading finds each expert by its global name
// in whichever expert dir holds it, so any EP (and TP, PP, DP, plain or
// sharded) loads any other; without that field the experts are read from the
// mp_rank dirs as TP-replicated tensors (EP 1 checkpoints from before, and
// converted ones: write_model_shard with ShardParams::kAll).
//
// Main weights: a bf16 run takes them from main_param.* when
// the checkpoint has them, else from model.safetensors (an fp32 run's, or a
// converted release); an fp32 run loading with optimizer state takes its
// weights from main_param.* when present (a bf16 run's exact fp32 weights).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "comm/parallel_state.h"
#include "kernels/precision.h"
#include "model/params.h"
#include "optim/optimizer.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_shard.h"
#include "checkpoint/checkpoint_verify.h"

namespace mt {

struct RunState {
  int64_t iteration = 0;         // completed iterations
  int64_t consumed_samples = 0;  // training samples read so far
  nlohmann::json args;           // model config and tokenizer (what generate needs)
  nlohmann::json grad_scaler;    // fp16: the dynamic loss scaler's state (null otherwise)
  int64_t skipped_iterations = 0;  // fp16 overflows: no update, the LR schedule did not advance
  int64_t skipped_samples = 0;     // their samples (the schedule counts samples with a batch ramp-up)
};


// Every rank calls it (collective over the world). `params` (the model's
// weights, fp32 or bf16) must be complete (distributed optimizer: no
// parameter all-gather in flight).
void save_checkpoint(const std::string& dir, const RunState& state, const ParamRegistry& reg,
                     const SavedWeights& params, const AdamWOptimizer* opt,
                     const ParallelState& ps);

// The phases of save_checkpoint, for --async-save (checkpoint/async_save.h):
// begin_save (collective: the iteration's .tmp directories), write_rank_files
// (this rank's files; no communication, so it may run on another thread) and
// finish_save (collective: meta.json with every file's checksum, then the
// commit that makes the checkpoint visible). Each failure is thrown as
// save_failure_message says.
struct RankFiles {
  FileChecksum model, optim, expert, expert_optim;  // bytes 0: this rank wrote no such file
};
// What write_rank_files reads: the weights and the optimizer's arrays (null
// opt: no optimizer state, --no-save-optim), live or a snapshot of them.
struct SaveSource {
  ReadView params;
  Fp32Copies fp32;                      // parameters written in fp32 from these host copies
  const AdamWOptimizer* opt = nullptr;  // layout only (segments, sharding)
  const float* exp_avg = nullptr;       // opt->state_floats() each, packed like opt's state
  const float* exp_avg_sq = nullptr;
  const float* main_params = nullptr;   // null without main weights
  int64_t steps = 0;
};
SaveSource save_source(const ParamRegistry& reg, const SavedWeights& params,
                       const AdamWOptimizer* opt);  // the live arrays
void begin_save(const std::string& dir, int64_t iteration, const ParamRegistry& reg,
                const ParallelState& ps);
RankFiles write_rank_files(const std::string& dir, int64_t iteration, const ParamRegistry& reg,
                           const SaveSource& src, const ParallelState& ps);
void finish_save(const std::string& dir, const RunState& state, const ParamRegistry& reg,
                 const RankFiles& files, const ParallelState& ps);
// "saving the checkpoint of iteration N failed: <what>; ... still resumes from ...; fix: ...".
std::string save_failure_message(const std::string& dir, int64_t iteration, std::string what);

// Receives parameter i's loaded values (its whole local tensor, numel floats).
using ParamSink = std::function<void(size_t i, const float* values)>;

// Loads the latest checkpoint of `dir`, re-sharding on the fly when it was
// saved with another TP or PP size: every parameter's values go to set_param;
// with opt, the owned parts of its moments and (when saved) main weights go
// to opt. Main weights the checkpoint lacks are set_param's to set from the
// values (the trainer's sink sets both). Every file and tensor read is checked
// against its checksum (checkpoint/checkpoint_verify.h) unless verify_checksums is
// false (--no-verify-checkpoint-checksums).
RunState load_checkpoint(const std::string& dir, const ParamRegistry& reg,
                         const ParamSink& set_param, AdamWOptimizer* opt, const ParallelState& ps,
                         bool verify_checksums = true);
// The same into a flat fp32 buffer (total floats, the registry's offsets).
RunState load_checkpoint(const std::string& dir, const ParamRegistry& reg, float* params,
                         AdamWOptimizer* opt, const ParallelState& ps,
                         bool verify_checksums = true);

}  // namespace mt

namespace mt {
// Float fields are written as given (0.1, not 0.10000000149011612): the
// shortest decimal that reads back as the same float (float_as_written).
nlohmann::json model_config_to_json(const ModelConfig& c);
double float_as_written(float f);
ModelConfig model_config_from_json(const nlohmann::json& j);
// Refuses (naming the flag and both values) a --load whose model differs from
// this run's in its architecture — anything but dropout, init (which may
// change on resume, as in Megatron), the sequence length and the vocabulary
// padding: its weights would load into another function in silence.
// `saved`, `run`: model_config_to_json objects, compared as the models they
// describe (resolved_architecture: --moe-layer-freq 1 and [1,1] alike). The
// fix names the flag with the checkpoint's value in a form the parser takes.
void check_same_architecture(const nlohmann::json& saved, const nlohmann::json& run,
                             const std::string& load);
}  // namespace mt
