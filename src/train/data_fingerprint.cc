#include "train/data_fingerprint.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include "checkpoint/crc32c.h"
#include "core/error.h"
#include "data/mock_gpt_dataset.h"

namespace mt {

namespace {

// Size and CRC-32C of a whole file, mapped (no heap buffer: a large freed one
// would raise malloc's mmap threshold, and the model's buffers allocated
// after it would then reuse resident heap pages, which --log-memory's
// measurement by first touch would not see); nullopt when it cannot be
// opened (the dataset's reader then says why, in its words).
std::optional<std::pair<int64_t, uint32_t>> size_and_crc(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return std::nullopt;
  }
  const auto size = size_t(st.st_size);
  uint32_t crc = 0;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    MT_CHECK(p != MAP_FAILED, "cannot map ", path, " to checksum it: ", std::strerror(err));
    crc = crc32c_parallel(p, size);
    ::munmap(p, size);
  } else {
    ::close(fd);
  }
  return std::pair<int64_t, uint32_t>{int64_t(size), crc};
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

nlohmann::json mock_data_record(int64_t vocab_size, int64_t eod) {
  return {{"mock", "MockGPTDataset"},
          {"documents", kMockDocuments},
          {"seed", kMockSeed},
          {"max_sequence_length", kMockMaxSequenceLength},
          {"split", kMockSplit},
          {"vocab_size", vocab_size},
          {"eod", eod}};
}

namespace {

// The mock record in a "datasets" list, or null.
nlohmann::json mock_of(const nlohmann::json& datasets) {
  if (datasets.is_array())
    for (const nlohmann::json& d : datasets)
      if (d.is_object() && d.contains("mock")) return d;
  return nullptr;
}

}  // namespace

std::string changed_data_source(const nlohmann::json& saved, const nlohmann::json& now,
                                const std::string& checkpoint) {
  if (!saved.is_array()) return "";  // saved before datasets were recorded
  const nlohmann::json was = mock_of(saved), is = mock_of(now);
  if (was.is_null() && is.is_null()) return "";
  if (was == is) return "";
  std::string what;
  if (was.is_null())
    what = "was trained on a data path and this run reads --mock-data";
  else if (is.is_null())
    what = "was trained on --mock-data and this run reads a data path";
  else
    what = "was trained on other mock documents (" + was.dump() + ", now " + is.dump() + ")";
  return "--load " + checkpoint + " " + what + "; training goes on from the checkpoint's "
         "consumed samples in this run's data (fix, if unintended: pass the checkpoint's data "
         "flags, or --finetune to start this data from its beginning)";
}

std::string changed_dataset(const nlohmann::json& saved, const nlohmann::json& now,
                            const std::string& checkpoint) {
  if (!saved.is_array()) return "";  // saved before datasets were recorded
  for (const nlohmann::json& n : now)
    for (const nlohmann::json& s : saved) {
      if (!n.contains("path")) continue;  // mock data: changed_data_source
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
