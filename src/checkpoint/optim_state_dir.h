// Reading the optimizer state of one checkpoint directory (checkpoint_io.h):
// every optim_dp_*.safetensors of an mp_rank_TT_PPP directory, or every
// optim_edp_*.safetensors of an MoE expert directory mp_rank_00_PPP_EEE, and
// where each parameter's elements are in them (whole tensors, or the
// distributed optimizer's 1-D slices with the metadata "slices").
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_verify.h"
#include "checkpoint/safetensors.h"

namespace mt {

class OptimStateDir {
 public:
  // Opens every `rank_dir`/<file_prefix>*.safetensors (file_prefix "optim_dp_"
  // or "optim_edp_") through `verifier`; throws naming the directory when
  // there is none, or when one that meta.json recorded is missing.
  OptimStateDir(const std::string& rank_dir, const std::string& file_prefix,
                const CheckpointVerifier& verifier);

  int64_t steps() const { return steps_; }
  // Whether a bf16 run saved its fp32 main weights here (main_param.<name>).
  bool has_main_params() const { return has_main_; }

  // The whole local tensor `prefix<name>` (numel floats) from the slices,
  // which must cover every element.
  void read(const std::string& prefix, const std::string& name, float* dst, int64_t numel) const;

 private:
  struct Piece {
    size_t file;
    int64_t begin, end;  // end -1: the whole tensor
  };
  std::string dir_, files_glob_;  // files_glob_: "optim_dp_*.safetensors", for messages
  std::vector<SafetensorsReader> files_;
  std::map<std::string, std::vector<Piece>> pieces_;
  int64_t steps_ = 0;
  bool has_main_ = false;
};

}  // namespace mt
