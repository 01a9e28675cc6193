#include "model/params.h"

#include <algorithm>
#include <cmath>

#include "core/divide.h"
#include "core/error.h"
#include "core/rng.h"
#include "kernels/fill.h"
#include "model/blocks/transformer_layer.h"
#include "model/mtp.h"

namespace mt {

const char* grad_group_name(GradGroup g) {
  return g == GradGroup::kDataParallel ? "data-parallel" : "expert-data-parallel";
}

std::pair<int64_t, int64_t> stage_layer_range(int64_t num_layers, int pp_size, int pp_rank,
                                              int64_t first_stage_layers,
                                              int64_t last_stage_layers) {
  MT_CHECK(first_stage_layers >= 0 && last_stage_layers >= 0, "stage layer counts ",
           first_stage_layers, ", ", last_stage_layers, " must be >= 0");
  if (pp_size == 1) {
    MT_CHECK(first_stage_layers == 0 && last_stage_layers == 0,
             "--decoder-first/last-pipeline-num-layers need --pipeline-model-parallel-size > 1");
    return {0, num_layers};
  }
  const int64_t first = first_stage_layers, last = last_stage_layers;
  const int64_t fixed = (first > 0) + (last > 0);
  const int64_t rest = num_layers - first - last;
  const int64_t middle_stages = pp_size - fixed;
  MT_CHECK(rest >= 0 && (middle_stages == 0 ? rest == 0 : rest % middle_stages == 0),
           "--num-layers ", num_layers, " minus the first/last stage's ", first, " + ", last,
           " layers does not split evenly over the other ", middle_stages,
           " pipeline stages; fix: change --decoder-first/last-pipeline-num-layers or the sizes");
  const int64_t per = middle_stages > 0 ? rest / middle_stages : 0;
  MT_CHECK(middle_stages == 0 || per > 0, "pipeline stages would get no layers: --num-layers ",
           num_layers, " over ", pp_size, " stages");
  int64_t begin = 0;
  for (int r = 0; r < pp_rank; ++r)
    begin += (r == 0 && first > 0) ? first : per;
  const int64_t count = (pp_rank == 0 && first > 0) ? first
                        : (pp_rank == pp_size - 1 && last > 0) ? last
                                                               : per;
  return {begin, begin + count};
}

std::vector<std::pair<int64_t, int64_t>> virtual_stage_chunks(int64_t num_layers, int pp_size,
                                                              int pp_rank, int64_t vpp) {
  const int64_t k = divide(num_layers, int64_t(pp_size) * vpp,
                           "--num-layers by PP x virtual stages");
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t c = 0; c < vpp; ++c) {
    const int64_t begin = c * (num_layers / vpp) + pp_rank * k;
    out.push_back({begin, begin + k});
  }
  return out;
}

std::string layer_prefix(int64_t layer) { return "decoder.layers." + std::to_string(layer) + "."; }

int64_t ParamSpec::global_row(int64_t r, int64_t tp_rank, int64_t tp_size) const {
  if (partition_dim != 0) return r;
  const int64_t block = global_rows / row_blocks;  // rows of one block
  const int64_t local = block / tp_size;           // of one block on one rank
  return r / local * block + tp_rank * local + r % local;
}

ParamRegistry::ParamRegistry(const ModelConfig& cfg, const StageLayout& stage)
    : cfg_(cfg), stage_(stage) {
  const int64_t h = cfg.hidden_size, v = cfg.padded_vocab_size;
  const float std = cfg.init_method_std;
  // Parameters added since index `first` belong to `part` (layer `layer`).
  auto tag = [&](size_t first, Part part, int64_t layer) {
    for (size_t i = first; i < params_.size(); ++i) params_[i].part = part;
    if (layer >= 0) set_layer(first, layer);
  };
  // Tied, or with MTP (which embeds the shifted tokens): the last stage holds
  // a copy of the (vocab-parallel) word embedding, summed over the embedding
  // group as Megatron does for both.
  if (stage.has_embedding || (stage.has_output && (cfg.tied_output() || cfg.mtp()))) {
    ParamSpec& word = add("embedding.word_embeddings.weight", v, h, 2, 0, Init::kNormal, std, true);
    word.tied = cfg.tied_output() || cfg.mtp();
    word.embedding_or_output = true;
  }
  if (stage.has_embedding && cfg.learned_positions())
    add("embedding.position_embeddings.weight", cfg.max_position_embeddings, h, 2, -1,
        Init::kNormal, std, true);
  for (const auto& [chunk_begin, chunk_end] : stage.chunk_ranges()) {
    for (int64_t l = chunk_begin; l < chunk_end; ++l) {
      const size_t first = params_.size();
      layer_param_specs(*this, l);  // its blocks' parameters, in order
      tag(first, Part::kLayer, l);
    }
  }
  if (stage.has_output) {
    const size_t first = params_.size();
    norm_param_specs(*this, "decoder.final_layernorm");
    if (!cfg.tied_output())
      add("output_layer.weight", v, h, 2, 0, Init::kNormal, std, true).embedding_or_output = true;
    mtp_param_specs(*this);  // the MTP depths: part of the loss head
    tag(first, Part::kLossHead, -1);
  }
  // Expert parameters (reduced over another group) after all the others, in
  // model order: each group's gradients are then one contiguous range.
  std::stable_partition(params_.begin(), params_.end(), [](const ParamSpec& p) {
    return p.grad_group == GradGroup::kDataParallel;
  });
  total_floats_ = 0;
  for (ParamSpec& p : params_) {
    p.offset = total_floats_;
    total_floats_ += (p.numel() + 15) / 16 * 16;  // 64-byte aligned starts
  }
}

void ParamRegistry::set_layer(size_t first, int64_t layer) {
  for (size_t i = first; i < params_.size(); ++i) params_[i].layer = layer;
}

int64_t ParamRegistry::group_begin(GradGroup g) const {
  for (const ParamSpec& p : params_)
    if (p.grad_group == g) return p.offset;
  return total_floats_;
}

ParamSpec& ParamRegistry::add(std::string name, int64_t rows, int64_t cols, int ndim,
                              int partition_dim, Init init, float std, bool decay,
                              int64_t row_blocks) {
  ParamSpec p;
  p.name = std::move(name);
  p.global_rows = rows;
  p.global_cols = cols;
  p.ndim = ndim;
  p.partition_dim = partition_dim;
  p.rows = rows;
  p.cols = cols;
  p.row_blocks = row_blocks;
  if (partition_dim == 0) {
    const int64_t block = divide(rows, p.row_blocks, "rows of a gated fc1 by its 2 halves");
    const int64_t local = divide(block, stage_.tp_size, "rows of a tensor-parallel weight by TP");
    p.rows = local * p.row_blocks;
    p.row_offset = local * stage_.tp_rank;
  } else if (partition_dim == 1) {
    p.cols = divide(cols, stage_.tp_size, "columns of a tensor-parallel weight by TP");
    p.col_offset = p.cols * stage_.tp_rank;
  }
  p.init = init;
  p.init_std = std;
  p.weight_decay = decay;
  p.offset = total_floats_;
  total_floats_ += (p.numel() + 15) / 16 * 16;  // 64-byte aligned starts
  params_.push_back(std::move(p));
  return params_.back();
}

const ParamSpec& ParamRegistry::get(const std::string& name) const {
  for (const ParamSpec& p : params_)
    if (p.name == name) return p;
  MT_FAIL("no parameter named '", name, "' on this rank");
}

bool ParamRegistry::has(const std::string& name) const {
  for (const ParamSpec& p : params_)
    if (p.name == name) return true;
  return false;
}

void ParamRegistry::initialize_param(size_t i, float* dst, uint64_t seed) const {
  const ParamSpec& p = params_.at(i);
  if (p.init != Init::kNormal) {
    const float x = p.init == Init::kOnes ? 1.f : 0.f;
    for (int64_t k = 0; k < p.numel(); ++k) dst[k] = x;
    return;
  }
  const RngStream rng = RngStream::make(seed, p.name);
  fill_normal(dst, p.rows, p.cols, p.init_std, rng, [&](int64_t r) {
    const uint64_t grow = uint64_t(p.global_row(r, stage_.tp_rank, stage_.tp_size));
    return grow * uint64_t(p.global_cols) + uint64_t(p.col_offset);
  });
}

void ParamRegistry::initialize(float* values, uint64_t seed) const {
  for (size_t i = 0; i < params_.size(); ++i) initialize_param(i, values + params_[i].offset, seed);
}

}  // namespace mt
