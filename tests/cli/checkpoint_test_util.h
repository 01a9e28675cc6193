// Reading a checkpoint's parameters back as full tensors, whatever TP/PP
// layout saved them: for equivalence tests against a one-rank run.
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"

namespace mt::test {

// An MoE expert tensor `name` from whichever expert directory
// (mp_rank_00_PPP_EEE) holds it, whole; empty if none does.
inline std::vector<float> expert_tensor(const std::string& iter_dir, const std::string& name) {
  for (const auto& e : std::filesystem::directory_iterator(iter_dir)) {
    const std::string d = e.path().filename().string();
    if (d.rfind("mp_rank_00_", 0) != 0 || d.size() != 18) continue;  // mp_rank_00_PPP_EEE
    SafetensorsReader r(e.path().string() + "/model.safetensors");
    if (!r.has(name)) continue;
    std::vector<float> full(static_cast<size_t>(r.info(name).numel()));
    r.read_f32(name, full.data(), int64_t(full.size()));
    return full;
  }
  return {};
}

// Parameter `name` assembled from the TP shards of whichever PP stage holds it
// (an MoE expert from its expert directory).
inline std::vector<float> gathered(const std::string& iter_dir, const std::string& name, int tp,
                                   int pp) {
  if (name.find(".local_experts.") != std::string::npos) {
    std::vector<float> e = expert_tensor(iter_dir, name);
    if (e.empty()) ADD_FAILURE() << name << " in no expert directory of " << iter_dir;
    return e;
  }
  for (int stage = 0; stage < pp; ++stage) {
    char dir[32];
    std::snprintf(dir, sizeof dir, "/mp_rank_00_%03d", stage);
    SafetensorsReader first(iter_dir + dir + "/model.safetensors");
    if (!first.has(name)) continue;
    const auto layout = nlohmann::json::parse(first.metadata_or("params", "{}"));
    const int pdim = layout.at(name).at("partition_dim").get<int>();
    const auto shape = layout.at(name).at("global_shape").get<std::vector<int64_t>>();
    const int64_t rows = shape[0], cols = shape.size() > 1 ? shape[1] : 1;
    // A TP shard of a tensor of row blocks ([gate; up]) holds its slice of each.
    const int64_t blocks = layout.at(name).value("row_blocks", int64_t(1));
    const int64_t sr = pdim == 0 ? rows / tp : rows, sc = pdim == 1 ? cols / tp : cols;
    std::vector<float> full(static_cast<size_t>(rows * cols)), s(static_cast<size_t>(sr * sc));
    for (int t = 0; t < (pdim < 0 ? 1 : tp); ++t) {
      std::snprintf(dir, sizeof dir, "/mp_rank_%02d_%03d", t, stage);
      SafetensorsReader r(iter_dir + dir + "/model.safetensors");
      r.read_f32(name, s.data(), sr * sc);
      for (int64_t i = 0; i < sr; ++i)
        for (int64_t j = 0; j < sc; ++j)
          full[size_t((pdim == 0 ? i / (sr / blocks) * (rows / blocks) + t * (sr / blocks) +
                                       i % (sr / blocks)
                                 : i) *
                           cols +
                       j + (pdim == 1 ? t * sc : 0))] = s[size_t(i * sc + j)];
    }
    return full;
  }
  ADD_FAILURE() << name << " in no stage of " << iter_dir;
  return {};
}

// Relative tolerance for a parameter of a layout that should equal one rank
// (round-off only): `tol`, except for GPT-2's QKV bias, whose key rows have an
// analytically zero gradient (softmax is shift-invariant per query), so
// AdamW steps them by round-off / sqrt(round-off²) — ~1e-5 apart after a few
// steps (tests/reference/README.md).
inline double weight_tolerance(const std::string& name, double tol = 1e-6) {
  return name.find("linear_qkv.bias") != std::string::npos ? 1e-4 : tol;
}

}  // namespace mt::test
