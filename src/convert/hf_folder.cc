#include "convert/hf_folder.h"

#include <cstdio>
#include <filesystem>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "checkpoint/atomic_file.h"
#include "core/error.h"
#include "kernels/precision.h"

namespace mt {

namespace fs = std::filesystem;

HfWeightsReader::HfWeightsReader(const std::string& dir) {
  const std::string single = dir + "/model.safetensors";
  const std::string index = dir + "/model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(single, ec)) {
    files_.emplace_back(single);
    for (const std::string& n : files_.back().names()) where_[n] = 0;
    return;
  }
  MT_CHECK(fs::exists(index, ec), dir, " has neither model.safetensors nor "
           "model.safetensors.index.json; fix: --load-dir a Hugging Face model folder saved with "
           "safetensors (save_pretrained(..., safe_serialization=True)); PyTorch .bin files are "
           "not read");
  nlohmann::json map;
  try {
    map = nlohmann::json::parse(read_text_file(index)).at("weight_map");
  } catch (const nlohmann::json::exception& e) {
    MT_FAIL(index, ": no readable \"weight_map\" (", e.what(), ")");
  }
  MT_CHECK(map.is_object() && !map.empty(), index, ": \"weight_map\" is not a non-empty object");
  std::map<std::string, size_t> file_index;
  for (const auto& item : map.items()) {
    MT_CHECK(item.value().is_string(), index, ": weight_map[\"", item.key(),
             "\"] is not a file name");
    const std::string file = item.value().get<std::string>();
    MT_CHECK(!file.empty() && file.find('/') == std::string::npos && file != "." && file != "..",
             index, ": weight_map[\"", item.key(), "\"] = \"", file,
             "\" is not a file name inside the folder");
    auto [it, added] = file_index.emplace(file, files_.size());
    if (added) files_.emplace_back(dir + "/" + file);
    MT_CHECK(files_[it->second].has(item.key()), index, " maps '", item.key(), "' to ", file,
             ", which does not hold it; the folder is incomplete or mixed up");
    where_[item.key()] = it->second;
  }
}

std::vector<std::string> HfWeightsReader::names() const {
  std::vector<std::string> out;
  for (const auto& [n, f] : where_) out.push_back(n);
  return out;
}

const StTensorInfo& HfWeightsReader::info(const std::string& name) const {
  return files_.at(where_.at(name)).info(name);
}

const std::string& HfWeightsReader::file_of(const std::string& name) const {
  return files_.at(where_.at(name)).path();
}

void HfWeightsReader::read_f32(const std::string& name, float* dst,
                               const std::vector<int64_t>& shape) const {
  const SafetensorsReader& r = files_.at(where_.at(name));
  r.read_f32(name, dst, shape);
  r.release_pages(name);  // stream: hold one tensor, not the file
}

HfWeightsWriter::HfWeightsWriter(std::string dir, std::vector<HfTensor> order, bool bf16,
                                 uint64_t max_shard_bytes)
    : dir_(std::move(dir)), order_(std::move(order)), bf16_(bf16) {
  uint64_t in_file = 0;
  for (size_t t = 0; t < order_.size(); ++t) {
    const uint64_t bytes = uint64_t(order_[t].numel()) * (bf16_ ? 2 : 4);
    if (files_.empty() || (in_file > 0 && in_file + bytes > max_shard_bytes)) {
      files_.emplace_back();
      in_file = 0;
    }
    files_.back().tensors.push_back(t);
    files_.back().pending++;
    in_file += bytes;
    total_bytes_ += bytes;
    file_of_.push_back(files_.size() - 1);
    MT_CHECK(index_.emplace(order_[t].name, t).second, "tensor '", order_[t].name,
             "' is planned twice");
  }
  for (size_t f = 0; f < files_.size(); ++f) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", f + 1, files_.size());
    files_[f].name = files_.size() == 1 ? "model.safetensors" : buf;
  }
  held_.resize(order_.size());
}

void HfWeightsWriter::put(const std::string& name, std::vector<float> data) {
  const auto it = index_.find(name);
  MT_CHECK(it != index_.end(), "tensor '", name, "' is not planned for ", dir_);
  const size_t t = it->second;
  MT_CHECK(int64_t(data.size()) == order_[t].numel(), "tensor '", name, "' has ", data.size(),
           " elements, not ", order_[t].numel());
  Held& h = held_[t];
  MT_CHECK(h.f32.empty() && h.bf16.empty(), "tensor '", name, "' is written twice");
  if (bf16_) {
    h.bf16.resize(data.size());
    f32_to_bf16(h.bf16.data(), data.data(), int64_t(data.size()));
  } else {
    h.f32 = std::move(data);
  }
  File& f = files_[file_of_[t]];
  if (--f.pending == 0) write_file(f);
}

void HfWeightsWriter::write_file(File& f) {
  SafetensorsWriter w;
  for (size_t t : f.tensors) {
    const Held& h = held_[t];
    w.add(order_[t].name, bf16_ ? StDType::kBF16 : StDType::kF32, order_[t].shape,
          bf16_ ? static_cast<const void*>(h.bf16.data()) : h.f32.data());
  }
  w.set_metadata("format", "pt");  // what transformers' safetensors loading expects
  w.write(dir_ + "/" + f.name);
  for (size_t t : f.tensors) held_[t] = Held{};
}

void HfWeightsWriter::finish() {
  for (const File& f : files_)
    MT_CHECK(f.pending == 0, dir_, "/", f.name, " is missing ", f.pending, " of its tensors");
  if (files_.size() <= 1) return;
  nlohmann::json map = nlohmann::json::object();
  for (size_t t = 0; t < order_.size(); ++t) map[order_[t].name] = files_[file_of_[t]].name;
  const nlohmann::json index = {{"metadata", {{"total_size", total_bytes_}}}, {"weight_map", map}};
  atomic_write_text(dir_ + "/model.safetensors.index.json", index.dump(2) + "\n");
}

}  // namespace mt
