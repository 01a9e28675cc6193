#include "train/blend_cache.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "checkpoint/atomic_file.h"
#include "checkpoint/crc32c.h"
#include "core/error.h"
#include "core/log.h"
#include "data/sha256.h"

namespace mt {

namespace {

constexpr char kMagic[8] = {'M', 'T', 'B', 'L', 'E', 'N', 'D', '1'};

void put_u64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }

}  // namespace

std::string blend_cache_file(const std::string& dir, const std::string& description) {
  return dir + "/blend_index_" + sha256_hex(description).substr(0, 16) + ".bin";
}

bool read_blend_cache(const std::string& file, const std::string& description, BlendIndex* index,
                      std::string* problem) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    *problem = "absent";
    return false;
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t at = 0;
  auto take = [&](void* dst, size_t n) {
    if (bytes.size() - at < n) return false;
    std::memcpy(dst, bytes.data() + at, n);
    at += n;
    return true;
  };
  char magic[8];
  uint64_t len = 0, n = 0;
  if (!take(magic, 8) || std::memcmp(magic, kMagic, 8) != 0 || !take(&len, 8) ||
      len != description.size() || bytes.size() - at < len ||
      bytes.compare(at, len, description) != 0) {
    *problem = "not the index of this blend (wrong magic or description)";
    return false;
  }
  at += len;
  if (!take(&n, 8) || n > (bytes.size() - at) / 10) {
    *problem = "truncated";
    return false;
  }
  index->dataset.resize(n);
  index->sample.resize(n);
  uint32_t crc = 0;
  if (!take(index->dataset.data(), n * 2) || !take(index->sample.data(), n * 8) ||
      !take(&crc, 4) || at != bytes.size() || crc != crc32c(bytes.data(), bytes.size() - 4)) {
    *problem = "damaged (size or CRC-32C mismatch)";
    return false;
  }
  return true;
}

void write_blend_cache(const std::string& file, const std::string& description,
                       const BlendIndex& index) {
  std::string bytes(kMagic, 8);
  put_u64(&bytes, description.size());
  bytes += description;
  put_u64(&bytes, uint64_t(index.size()));
  bytes.append(reinterpret_cast<const char*>(index.dataset.data()), index.dataset.size() * 2);
  bytes.append(reinterpret_cast<const char*>(index.sample.data()), index.sample.size() * 8);
  const uint32_t crc = crc32c(bytes.data(), bytes.size());
  bytes.append(reinterpret_cast<const char*>(&crc), 4);
  AtomicFileWriter w(file);
  w.write(bytes.data(), bytes.size());
  w.commit();
}

BlendIndexSource blend_cache_source(const std::string& dir, const Communicator& world) {
  if (dir.empty()) return {};
  return [dir, &world](const std::string& description, const std::function<BlendIndex()>& build) {
    const std::string file = blend_cache_file(dir, description);
    const bool rank0 = world.rank() == 0;
    BlendIndex index;
    std::string problem;
    if (rank0) {
      if (read_blend_cache(file, description, &index, &problem)) {
        log_line(true, "data: blend index of %lld samples read from %s\n",
                 static_cast<long long>(index.size()), file.c_str());
      } else {
        index = build();
        std::error_code ec;
        std::filesystem::create_directories(dir, ec);
        MT_CHECK(!ec, "--data-cache-path ", dir, ": cannot create it (", ec.message(),
                 "); fix: give a folder this job can write");
        write_blend_cache(file, description, index);
        log_line(true, "data: blend index of %lld samples built and saved to %s%s\n",
                 static_cast<long long>(index.size()), file.c_str(),
                 problem == "absent" ? "" : (" (the file there was " + problem + ")").c_str());
      }
    }
    world.barrier();  // rank 0's file is complete
    if (!rank0 && !read_blend_cache(file, description, &index, &problem)) index = build();
    return index;
  };
}

}  // namespace mt
