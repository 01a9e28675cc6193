// Saving and loading a training run (DESIGN.md "Checkpoints"):
//   <dir>/iter_0000010/mp_rank_TT_PPP/model.safetensors      this TP/PP rank's parameters
//   <dir>/iter_0000010/mp_rank_TT_PPP/optim_dp_DDD.safetensors  Adam moments (per DP shard)
//   <dir>/iter_0000010/meta.json                               iteration, data position, args
//   <dir>/latest_checkpointed_iteration.txt                    written last, atomically
// A checkpoint is written into iter_N.tmp and renamed only after every rank has
// finished, so a crash mid-save never leaves one that looks complete.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "dist/parallel_state.h"
#include "model/params.h"
#include "optim/optimizer.h"

namespace mt {

struct RunState {
  int64_t iteration = 0;         // completed iterations
  int64_t consumed_samples = 0;  // training samples read so far
  nlohmann::json args;           // model config and tokenizer (what generate needs)
};

std::string iteration_dir(const std::string& dir, int64_t iteration);
std::string rank_dir_name(int tp_rank, int pp_rank);  // "mp_rank_TT_PPP"

// Every rank calls it (collective over the world).
void save_checkpoint(const std::string& dir, const RunState& state, const ParamRegistry& reg,
                     const float* params, const AdamWOptimizer* opt, const ParallelState& ps);

// Iteration named by <dir>/latest_checkpointed_iteration.txt, or -1 if none.
int64_t latest_iteration(const std::string& dir);
// Reads meta.json of the latest checkpoint (throws if there is none).
nlohmann::json read_checkpoint_meta(const std::string& dir);

// Loads the latest checkpoint of `dir` into params (and opt, if non-null),
// re-sharding on the fly when it was saved with another TP or PP size.
RunState load_checkpoint(const std::string& dir, const ParamRegistry& reg, float* params,
                         AdamWOptimizer* opt, const ParallelState& ps);

}  // namespace mt

namespace mt {
nlohmann::json model_config_to_json(const ModelConfig& c);
ModelConfig model_config_from_json(const nlohmann::json& j);
}  // namespace mt
