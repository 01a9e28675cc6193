// The parameter list: one entry per tensor this rank holds, in a fixed order.
// It drives everything that touches parameters — allocation (one flat buffer
// each for values and gradients), initialisation (counter-based RNG keyed by
// name and *global* element index, so a shard draws exactly its slice),
// checkpoint names, weight-decay groups, and later DP buckets and ZeRO shards.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/precision.h"
#include "model/config.h"

namespace mt {

enum class Init : uint8_t { kNormal, kOnes, kZeros };

// The part of the model a parameter belongs to, as forward/backward report
// parts to their hooks (PassContext): the embeddings, one decoder layer, or
// the loss head (final norm and untied output layer).
enum class Part : uint8_t { kEmbedding, kLayer, kLossHead };

// The group a parameter's gradient is averaged over after backward (Megatron
// tags expert weights `allreduce=False` and reduces them over the
// expert-data-parallel group): today every parameter is dense, reduced over
// the data-parallel group (DP, or DP x CP with context parallelism). The DP
// buckets (optim/grad_buckets.h) refuse a parameter of any other group until
// that group's reduction exists.
enum class GradGroup : uint8_t { kDataParallel, kExpertDataParallel };
const char* grad_group_name(GradGroup g);

struct ParamSpec {
  std::string name;               // Megatron-core name, e.g. decoder.layers.3.mlp.linear_fc1.weight
  int64_t global_rows = 0;        // global shape (rows, cols); cols = 1 for vectors
  int64_t global_cols = 1;
  int ndim = 2;                   // 1 for vectors (biases, norms), 2 for matrices
  int partition_dim = -1;         // -1 replicated over TP; 0 rows split; 1 cols split
  int64_t rows = 0, cols = 1;     // local shape
  int64_t row_offset = 0, col_offset = 0;  // this shard's first global row / col
  Init init = Init::kZeros;
  float init_std = 0.f;
  bool weight_decay = false;      // Megatron: no decay for biases and 1-D params
  int64_t offset = 0;             // first float in the flat buffers (aligned)
  Part part = Part::kEmbedding;
  int64_t layer = -1;             // global layer index (Part::kLayer; an MTP depth's: L + depth)
  // The word embedding that is also the output layer (tied): the first and
  // the last pipeline stage each hold a copy, kept equal by summing their
  // gradients over the embedding group; only the first stage's counts in the
  // gradient norm.
  bool tied = false;
  // An MoE router's expert bias (Megatron's expert_bias buffer): saved,
  // loaded and re-sharded like a parameter, but not trained: its gradient
  // stays 0 (no decay), so AdamW leaves it; the trainer moves it after each
  // step from the experts' loads (moe_expert_bias_update).
  bool expert_bias = false;
  // The input embedding (word embeddings, also the tied output's copy) or the
  // output layer: Megatron's is_embedding_or_output_parameter, trained at
  // --decoupled-lr when given (optim/param_scheduler.h).
  bool embedding_or_output = false;
  // A row-partitioned tensor made of `row_blocks` stacked blocks that TP
  // splits one by one (SwiGLU's fc1 = [gate; up]: each rank holds its slice
  // of both), as Megatron does; 1 for a plain contiguous split.
  int64_t row_blocks = 1;
  GradGroup grad_group = GradGroup::kDataParallel;  // what its gradient is reduced over
  // A TP-replicated parameter whose gradient each TP rank only holds a part
  // of, even without sequence parallelism (the attention's q/k norms: a rank
  // sees its heads only): summed over TP before the DP reduction, as the
  // replicated ones are with sequence parallelism.
  bool tp_partial_grad = false;

  int64_t numel() const { return rows * cols; }
  bool tp_replicated() const { return partition_dim < 0; }
  // The hook number of its part: -1 embeddings, l for layer l, total_layers
  // for the loss head (see PassContext).
  int64_t part_id(int64_t total_layers) const {
    return part == Part::kEmbedding ? -1 : part == Part::kLayer ? layer : total_layers;
  }
  // Global row of local row r on TP rank `tp_rank` of `tp_size` (for any
  // rank's shard, so that re-sharding can place a saved shard's rows).
  int64_t global_row(int64_t r, int64_t tp_rank, int64_t tp_size) const;
};

// Which part of the model this rank holds.
struct StageLayout {
  int64_t tp_rank = 0, tp_size = 1;
  int64_t layer_begin = 0, layer_end = 0;  // global layer indices [begin, end)
  bool has_embedding = true;               // first pipeline stage
  bool has_output = true;                  // last pipeline stage (final norm + tied output)
  // Interleaved pipelines: the model chunks (virtual stages) this rank holds,
  // in order; empty means one chunk [layer_begin, layer_end). The embedding
  // belongs to the first chunk, the output layer to the last.
  std::vector<std::pair<int64_t, int64_t>> chunks;
  int64_t ep_rank = 0, ep_size = 1;  // expert parallelism: experts [E·r/EP, E·(r+1)/EP) here
  std::vector<std::pair<int64_t, int64_t>> chunk_ranges() const {
    return chunks.empty() ? std::vector<std::pair<int64_t, int64_t>>{{layer_begin, layer_end}}
                          : chunks;
  }
};

// The layers pipeline stage `pp_rank` of `pp_size` owns: an even split, or
// Megatron's uneven one when first_stage_layers / last_stage_layers (> 0) fix
// the first / last stage and the others share the rest evenly. Throws when
// the numbers do not fit.
std::pair<int64_t, int64_t> stage_layer_range(int64_t num_layers, int pp_size, int pp_rank,
                                              int64_t first_stage_layers = 0,
                                              int64_t last_stage_layers = 0);

// Megatron's interleaved layout: with v virtual stages of K = L/(P·v) layers,
// chunk c of stage p holds layers [c·L/v + p·K, c·L/v + (p+1)·K).
std::vector<std::pair<int64_t, int64_t>> virtual_stage_chunks(int64_t num_layers, int pp_size,
                                                              int pp_rank, int64_t vpp);

class ParamRegistry {
 public:
  ParamRegistry(const ModelConfig& cfg, const StageLayout& stage);

  const std::vector<ParamSpec>& params() const { return params_; }
  // The parameters added since index `first` hold global layer index `layer`
  // (an MTP depth's layer: num_layers + depth, as its dropout keys).
  void set_layer(size_t first, int64_t layer);
  const ParamSpec& get(const std::string& name) const;
  bool has(const std::string& name) const;
  int64_t total_floats() const { return total_floats_; }
  // The parameters of each gradient group are contiguous, the data-parallel
  // ones first: the first float of group g's range (total_floats() if empty).
  int64_t group_begin(GradGroup g) const;
  const ModelConfig& config() const { return cfg_; }
  const StageLayout& stage() const { return stage_; }

  // Writes every parameter's initial values into `values` (total_floats()).
  void initialize(float* values, uint64_t seed) const;
  // Parameter i's initial values, its whole local tensor, into dst (numel()).
  void initialize_param(size_t i, float* dst, uint64_t seed) const;

  // Appends a parameter (global shape rows x cols; partition_dim -1, 0 or 1
  // over TP) at the next aligned offset. Called while the registry is built,
  // by the blocks' parameter-spec functions (model/blocks), in model order.
  ParamSpec& add(std::string name, int64_t rows, int64_t cols, int ndim, int partition_dim,
                 Init init, float std, bool decay, int64_t row_blocks = 1);

 private:

  ModelConfig cfg_;
  StageLayout stage_;
  std::vector<ParamSpec> params_;
  int64_t total_floats_ = 0;
};

std::string layer_prefix(int64_t layer);  // "decoder.layers.<l>."

// A registry's weights as a checkpoint save reads them: the value buffer
// (fp32 or bf16, registry offsets) and the parameters kept in fp32 beside it
// (registry offset -> that copy, on the weights' device: the expert biases of
// bf16 runs, model/model_runtime.h).
struct SavedWeights {
  ReadView values;
  const std::map<int64_t, const float*>* fp32 = nullptr;
};

}  // namespace mt
