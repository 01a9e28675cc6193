#include "checkpoint/checkpoint_shard.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"

namespace mt {

namespace {

nlohmann::json param_layout(const ParamRegistry& reg) {
  nlohmann::json j = nlohmann::json::object();
  for (const ParamSpec& p : reg.params()) {
    j[p.name] = {{"global_shape", p.ndim == 1 ? nlohmann::json{p.global_rows}
                                               : nlohmann::json{p.global_rows, p.global_cols}},
                 {"partition_dim", p.partition_dim}};
    // Row blocks split one by one (SwiGLU's [gate; up]): each shard holds its
    // slice of every block, in block order.
    if (p.row_blocks > 1) j[p.name]["row_blocks"] = p.row_blocks;
  }
  return j;
}

}  // namespace

std::vector<int64_t> local_shape(const ParamSpec& p) {
  return p.ndim == 1 ? std::vector<int64_t>{p.rows} : std::vector<int64_t>{p.rows, p.cols};
}

FileChecksum write_model_shard(const std::string& path, const ParamRegistry& reg, ReadView params,
                       int pp_rank, int pp_size) {
  SafetensorsWriter model;
  for (const ParamSpec& p : reg.params()) {
    if (params.bf16)
      model.add(p.name, StDType::kBF16, local_shape(p), params.bf16 + p.offset);
    else
      model.add(p.name, StDType::kF32, local_shape(p), params.f32 + p.offset);
  }
  model.set_metadata("format", "megatron.cpp");
  model.set_metadata("params", param_layout(reg).dump());
  model.set_metadata("tp_rank", std::to_string(reg.stage().tp_rank));
  model.set_metadata("tp_size", std::to_string(reg.stage().tp_size));
  model.set_metadata("pp_rank", std::to_string(pp_rank));
  model.set_metadata("pp_size", std::to_string(pp_size));
  FileChecksum sum;
  sum.bytes = model.write(path, &sum.crc32c);
  return sum;
}

void read_full_tensor(const std::string& iter_dir, const ShardSource& read, const ParamSpec& p,
                      int saved_tp, int saved_pp_rank, float* full) {
  const int64_t R = p.global_rows, C = p.global_cols;
  const int64_t sr = p.partition_dim == 0 ? R / saved_tp : R;
  const int64_t sc = p.partition_dim == 1 ? C / saved_tp : C;
  const int shards = p.partition_dim < 0 ? 1 : saved_tp;  // replicated: rank 0's copy
  std::vector<float> shard(static_cast<size_t>(sr * sc));
  for (int t = 0; t < shards; ++t) {
    read(iter_dir + "/" + rank_dir_name(t, saved_pp_rank), shard.data(), sr * sc);
    const int64_t c0 = p.partition_dim == 1 ? t * sc : 0;
    for (int64_t i = 0; i < sr; ++i)
      std::copy(shard.begin() + i * sc, shard.begin() + (i + 1) * sc,
                full + p.global_row(i, t, saved_tp) * C + c0);
  }
}

int saved_stage_of(const ParamSpec& p, int saved_pp, const std::vector<int>& layer_stage) {
  switch (p.part) {
    case Part::kLayer: return layer_stage.at(size_t(p.layer));
    case Part::kLossHead: return saved_pp - 1;
    case Part::kEmbedding: return 0;
  }
  return 0;
}

}  // namespace mt
