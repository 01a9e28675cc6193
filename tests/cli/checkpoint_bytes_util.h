// Editing a saved checkpoint's bytes the way damage or older versions would:
// flipping one byte inside a tensor or a header, rewriting a file with other
// values (and re-recording it, as a save would have), stripping checksums.
#pragma once
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/crc32c.h"
#include "checkpoint/safetensors.h"
#include "cli_test_util.h"

namespace mt::test {

// Byte offset of tensor `name`'s data in a safetensors file.
inline uint64_t tensor_offset(const std::string& path, const std::string& name) {
  const std::string bytes = read_text(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  return 8 + n + header.at(name).at("data_offsets").at(0).get<uint64_t>();
}

// XORs the byte at `offset` with `mask`.
inline void flip_byte(const std::string& path, uint64_t offset, unsigned char mask = 0x01) {
  std::string bytes = read_text(path);
  ASSERT_LT(offset, bytes.size()) << path;
  bytes[offset] = char(bytes[offset] ^ mask);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The header JSON and the data section of a safetensors file.
inline std::pair<nlohmann::ordered_json, std::string> split_file(const std::string& path) {
  const std::string bytes = read_text(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return {nlohmann::ordered_json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
}

inline void join_file(const std::string& path, const nlohmann::ordered_json& header,
                      const std::string& data) {
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << out + json + data;
}

// Records file `rel` (relative to iter_dir) in iter_dir/meta.json with its
// current length and CRC, as a save that wrote these bytes would have.
inline void rerecord(const std::string& iter_dir, const std::string& rel) {
  const std::string bytes = read_text(iter_dir + "/" + rel);
  auto meta = nlohmann::json::parse(read_text(iter_dir + "/meta.json"));
  meta["files"][rel] = {{"bytes", bytes.size()},
                        {"crc32c", crc32c_hex(crc32c(bytes.data(), bytes.size()))}};
  std::ofstream(iter_dir + "/meta.json", std::ios::trunc) << meta.dump(2);
}

// Sets float `index` of tensor `name` to `value` with consistent checksums
// (the tensor's in the header, the file's in meta.json): a checkpoint that
// was saved holding that value.
inline void set_saved_value(const std::string& iter_dir, const std::string& rel,
                            const std::string& name, int64_t index, float value) {
  const std::string path = iter_dir + "/" + rel;
  auto [header, data] = split_file(path);
  const uint64_t b = header.at(name).at("data_offsets").at(0).get<uint64_t>();
  const uint64_t e = header.at(name).at("data_offsets").at(1).get<uint64_t>();
  std::memcpy(&data[b + 4 * uint64_t(index)], &value, 4);
  auto crcs = nlohmann::json::parse(header["__metadata__"]["crc32c"].get<std::string>());
  crcs[name] = crc32c_hex(crc32c(data.data() + b, e - b));
  header["__metadata__"]["crc32c"] = crcs.dump();
  join_file(path, header, data);
  rerecord(iter_dir, rel);
}

// Makes an iteration look like one saved before checksums existed: no
// "files" in meta.json, no "crc32c" in any safetensors header.
inline void strip_checksums(const std::string& iter_dir) {
  namespace fs = std::filesystem;
  auto meta = nlohmann::json::parse(read_text(iter_dir + "/meta.json"));
  meta.erase("files");
  std::ofstream(iter_dir + "/meta.json", std::ios::trunc) << meta.dump(2);
  for (const auto& e : fs::recursive_directory_iterator(iter_dir)) {
    if (e.path().extension() != ".safetensors") continue;
    auto [header, data] = split_file(e.path().string());
    header["__metadata__"].erase("crc32c");
    join_file(e.path().string(), header, data);
  }
}

}  // namespace mt::test
