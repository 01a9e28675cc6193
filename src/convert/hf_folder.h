// The weight files of a Hugging Face model folder, read and written:
//   model.safetensors                           one file, or
//   model-00001-of-0000N.safetensors ...        shards, listed by
//   model.safetensors.index.json                {"metadata": {"total_size": bytes},
//                                                "weight_map": {"<tensor>": "<shard file>"}}
// Both sides stream: the reader maps the files and reads one tensor at a time
// (its pages then leave the resident set); the writer holds only the tensors
// of the shard being filled and writes it as soon as its last tensor arrives.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "convert/hf_weights.h"

namespace mt {

class HfWeightsReader {
 public:
  // Opens <dir>/model.safetensors, or every shard of
  // <dir>/model.safetensors.index.json; throws naming what is missing.
  explicit HfWeightsReader(const std::string& dir);

  std::vector<std::string> names() const;  // sorted
  bool has(const std::string& name) const { return where_.count(name) != 0; }
  const StTensorInfo& info(const std::string& name) const;
  const std::string& file_of(const std::string& name) const;
  // The tensor as float32 (from F32, F16, BF16 or F64); the shape must match.
  void read_f32(const std::string& name, float* dst, const std::vector<int64_t>& shape) const;

 private:
  std::vector<SafetensorsReader> files_;
  std::map<std::string, size_t> where_;  // tensor -> file
};

class HfWeightsWriter {
 public:
  // `order`: every tensor the folder will hold, in file order; files are
  // planned now (a new shard whenever the next tensor would take the current
  // one past max_shard_bytes; a larger tensor gets a shard of its own).
  HfWeightsWriter(std::string dir, std::vector<HfTensor> order, bool bf16,
                  uint64_t max_shard_bytes);

  // Hands over one tensor (float32, its HF shape's element count); stored as
  // bf16 (round to nearest even) when asked. A file is written as soon as all
  // of its tensors are in.
  void put(const std::string& name, std::vector<float> data);
  // After every tensor: writes the index of a sharded folder. Throws if a
  // tensor is missing.
  void finish();

  size_t files() const { return files_.size(); }
  uint64_t total_bytes() const { return total_bytes_; }

 private:
  struct File {
    std::string name;
    std::vector<size_t> tensors;  // indices into order_
    size_t pending = 0;           // tensors not yet put
  };
  struct Held {
    std::vector<float> f32;
    std::vector<uint16_t> bf16;
  };
  void write_file(File& f);

  std::string dir_;
  std::vector<HfTensor> order_;
  bool bf16_;
  std::vector<File> files_;
  std::vector<size_t> file_of_;          // by tensor
  std::map<std::string, size_t> index_;  // name -> tensor
  std::vector<Held> held_;
  uint64_t total_bytes_ = 0;
};

}  // namespace mt
