#include "train/data_fingerprint.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "checkpoint/crc32c.h"
#include "core/error.h"

namespace mt {

namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// Size and CRC-32C of a whole file, read in 8 MiB pieces; nullopt when it
// cannot be opened (the dataset's reader then says why, in its words).
std::optional<std::pair<int64_t, uint32_t>> size_and_crc(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (f == nullptr) return std::nullopt;
  std::vector<char> buf(size_t(8) << 20);
  int64_t size = 0;
  uint32_t crc = 0;
  for (size_t got; (got = std::fread(buf.data(), 1, buf.size(), f.get())) > 0;) {
    crc = crc32c_extend(crc, buf.data(), got);
    size += int64_t(got);
  }
  MT_CHECK(!std::ferror(f.get()), "read of ", path, " failed: ", std::strerror(errno));
  return std::pair<int64_t, uint32_t>{size, crc};
}

}  // namespace

nlohmann::json dataset_fingerprints(const std::vector<std::string>& prefixes) {
  nlohmann::json out = nlohmann::json::array();
  for (const std::string& prefix : prefixes) {
    std::error_code ec;
    const auto bin = size_and_crc(prefix + ".bin"), idx = size_and_crc(prefix + ".idx");
    if (!bin || !idx) continue;
    const auto [bin_bytes, bin_crc] = *bin;
    const auto [idx_bytes, idx_crc] = *idx;
    out.push_back({{"prefix", prefix},
                   {"path", std::filesystem::absolute(prefix, ec).lexically_normal().string()},
                   {"bin_bytes", bin_bytes},
                   {"idx_bytes", idx_bytes},
                   {"bin_crc32c", crc32c_hex(bin_crc)},
                   {"idx_crc32c", crc32c_hex(idx_crc)}});
  }
  return out;
}

std::string changed_dataset(const nlohmann::json& saved, const nlohmann::json& now,
                            const std::string& checkpoint) {
  if (!saved.is_array()) return "";  // saved before datasets were recorded
  for (const nlohmann::json& n : now)
    for (const nlohmann::json& s : saved) {
      if (!s.is_object() || s.value("path", "") != n.at("path").get<std::string>()) continue;
      std::string what;
      for (const char* ext : {"bin", "idx"}) {
        const std::string bytes = std::string(ext) + "_bytes", crc = std::string(ext) + "_crc32c";
        if (s.value(bytes, int64_t(-1)) != n.at(bytes).get<int64_t>())
          what += std::string(what.empty() ? "" : ", ") + "." + ext + " has " +
                  std::to_string(n.at(bytes).get<int64_t>()) + " bytes, " +
                  std::to_string(s.value(bytes, int64_t(-1))) + " when saved";
        else if (s.value(crc, "") != n.at(crc).get<std::string>())
          what += std::string(what.empty() ? "" : ", ") + "." + ext + " has CRC-32C " +
                  n.at(crc).get<std::string>() + ", " + s.value(crc, "?") + " when saved";
      }
      if (!what.empty())
        return "--data-path " + n.at("prefix").get<std::string>() + " changed since --load " +
               checkpoint + " was saved (" + what + "); resuming would read other samples than "
               "the checkpoint's consumed ones; fix: restore that dataset, pass "
               "--allow-changed-data to go on with the new contents, or --finetune to start "
               "its data from the beginning";
    }
  return "";
}

}  // namespace mt
