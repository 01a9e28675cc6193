#include "checkpoint/checkpoint_shard.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "backend/device.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"

namespace mt {

std::vector<int64_t> local_shape(const ParamSpec& p) {
  return p.ndim == 1 ? std::vector<int64_t>{p.rows} : std::vector<int64_t>{p.rows, p.cols};
}

namespace {

// The parameters a file holds: those of one gradient group, or (nullopt) all.
using GroupFilter = std::optional<GradGroup>;
bool in_file(const ParamSpec& p, GroupFilter which) {
  return !which || p.grad_group == *which;
}

nlohmann::json param_layout(const ParamRegistry& reg, GroupFilter which) {
  nlohmann::json j = nlohmann::json::object();
  for (const ParamSpec& p : reg.params()) {
    if (!in_file(p, which)) continue;
    j[p.name] = {{"global_shape", p.ndim == 1 ? nlohmann::json{p.global_rows}
                                               : nlohmann::json{p.global_rows, p.global_cols}},
                 {"partition_dim", p.partition_dim}};
    // Row blocks split one by one (SwiGLU's [gate; up]): each shard holds its
    // slice of every block, in block order.
    if (p.row_blocks > 1) j[p.name]["row_blocks"] = p.row_blocks;
  }
  return j;
}

// The parameters `which` into one file; tp/ep: the shard's coordinates.
FileChecksum write_shard(const std::string& path, const ParamRegistry& reg, ReadView params,
                         GroupFilter which, int tp_rank, int tp_size, int pp_rank, int pp_size,
                         int ep_rank, int ep_size, const Fp32Copies* fp32) {
  SafetensorsWriter model;
  for (const ParamSpec& p : reg.params()) {
    if (!in_file(p, which)) continue;
    const auto kept = fp32 ? fp32->find(p.offset) : Fp32Copies::const_iterator{};
    if (fp32 && kept != fp32->end())
      model.add(p.name, StDType::kF32, local_shape(p), kept->second.data());
    else if (params.bf16)
      model.add(p.name, StDType::kBF16, local_shape(p), params.bf16 + p.offset);
    else
      model.add(p.name, StDType::kF32, local_shape(p), params.f32 + p.offset);
  }
  model.set_metadata("format", "megatron.cpp");
  model.set_metadata("params", param_layout(reg, which).dump());
  model.set_metadata("tp_rank", std::to_string(tp_rank));
  model.set_metadata("tp_size", std::to_string(tp_size));
  model.set_metadata("pp_rank", std::to_string(pp_rank));
  model.set_metadata("pp_size", std::to_string(pp_size));
  if (ep_size > 0) {
    model.set_metadata("ep_rank", std::to_string(ep_rank));
    model.set_metadata("ep_size", std::to_string(ep_size));
  }
  FileChecksum sum;
  sum.bytes = model.write(path, &sum.crc32c);
  return sum;
}

}  // namespace

Fp32Copies host_fp32_copies(const ParamRegistry& reg, const SavedWeights& w) {
  Fp32Copies out;
  if (w.fp32 == nullptr) return out;
  for (const ParamSpec& p : reg.params()) {
    const auto k = w.fp32->find(p.offset);
    if (k == w.fp32->end()) continue;
    std::vector<float>& v = out[p.offset];
    v.resize(size_t(p.numel()));
    copy_bytes(v.data(), k->second, v.size() * sizeof(float));  // from the GPU too
  }
  return out;
}

FileChecksum write_model_shard(const std::string& path, const ParamRegistry& reg, ReadView params,
                               int pp_rank, int pp_size, ShardParams which,
                               const Fp32Copies* fp32) {
  return write_shard(path, reg, params,
                     which == ShardParams::kAll ? GroupFilter() : GradGroup::kDataParallel,
                     int(reg.stage().tp_rank), int(reg.stage().tp_size), pp_rank, pp_size, 0, 0,
                     fp32);
}

FileChecksum write_expert_shard(const std::string& path, const ParamRegistry& reg,
                                ReadView params, int pp_rank, int pp_size,
                                const Fp32Copies* fp32) {
  return write_shard(path, reg, params, GradGroup::kExpertDataParallel, 0, 1, pp_rank, pp_size,
                     int(reg.stage().ep_rank), int(reg.stage().ep_size), fp32);
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

ExpertIndex::ExpertIndex(const std::string& iter_dir, int saved_pp, int saved_ep,
                         const CheckpointVerifier& verifier)
    : iter_dir_(iter_dir), saved_ep_(saved_ep) {
  for (int p = 0; p < saved_pp; ++p)
    for (int e = 0; e < saved_ep; ++e) {
      const std::string d = iter_dir + "/" + expert_dir_name(e, p);
      const std::string path = d + "/model.safetensors";
      std::error_code ec;
      if (!std::filesystem::exists(path, ec)) {  // a stage without MoE layers has none
        for (const std::string& want : verifier.recorded_files(d, "model.safetensors"))
          MT_FAIL("checkpoint file ", want, " is missing (its meta.json recorded it when it was "
                  "saved)", verifier.fix_hint(want));
        continue;
      }
      SafetensorsReader r;
      verifier.open(r, path);
      for (const std::string& name : r.names()) dir_of_[name] = d;
    }
}

const std::string& ExpertIndex::dir_of(const std::string& name) const {
  const auto it = dir_of_.find(name);
  MT_CHECK(it != dir_of_.end(), "checkpoint ", iter_dir_, " holds no expert tensor '", name,
           "' in its expert directories (mp_rank_00_PPP_EEE, EP ", saved_ep_,
           "); fix: load a checkpoint of the same model configuration (--num-experts, "
           "--moe-layer-freq), or restore the missing expert directory");
  return it->second;
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
