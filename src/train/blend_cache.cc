#include "train/blend_cache.h"

#include <cstdio>
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
  const std::string size = std::to_string(bytes.size()) + " bytes";
  // Header: magic, description length, description, sample count.
  if (bytes.size() < 16) {
    *problem = "truncated (" + size + ", shorter than the 16-byte header)";
    return false;
  }
  uint64_t len = 0, n = 0;
  std::memcpy(&len, bytes.data() + 8, 8);
  if (std::memcmp(bytes.data(), kMagic, 8) != 0) {
    *problem = "corrupt (not a blend index: its first 8 bytes are not MTBLEND1)";
    return false;
  }
  if (len == description.size() && bytes.size() - 16 < len) {
    *problem = "truncated (" + size + ", ending inside the blend's description)";
    return false;
  }
  if (len != description.size() ||
      bytes.compare(16, len, description) != 0) {
    // A flipped byte inside the description reads as another blend: the
    // CRC-32C over the whole file tells which.
    uint32_t crc = 0;
    if (bytes.size() >= 4) std::memcpy(&crc, bytes.data() + bytes.size() - 4, 4);
    *problem = bytes.size() >= 4 && crc == crc32c(bytes.data(), bytes.size() - 4)
                   ? "the index of another blend (its description differs)"
                   : "corrupt (its description is not this blend's and its CRC-32C does not "
                     "match)";
    return false;
  }
  const size_t head = 16 + size_t(len);
  if (bytes.size() < head + 8) {
    *problem = "truncated (" + size + ", ending inside the header)";
    return false;
  }
  std::memcpy(&n, bytes.data() + head, 8);
  // The size the header's sample count implies (n samples of 2 + 8 bytes, the
  // CRC), when it is one a file can have.
  const bool fits = n <= (uint64_t(1) << 56);
  const uint64_t want = fits ? head + 8 + n * 10 + 4 : 0;
  if (!fits || bytes.size() != want) {
    // A changed byte in the count, or a file cut short? If the size holds a
    // whole number n2 of samples and the CRC-32C matches with n2 written in
    // the count, only the count changed.
    const uint64_t body = bytes.size() - head - 8;
    if (body >= 4 && (body - 4) % 10 == 0) {
      std::string fixed = bytes;
      const uint64_t n2 = (body - 4) / 10;
      std::memcpy(fixed.data() + head, &n2, 8);
      uint32_t crc = 0;
      std::memcpy(&crc, bytes.data() + bytes.size() - 4, 4);
      if (crc == crc32c(fixed.data(), fixed.size() - 4)) {
        *problem = "corrupt (its sample count reads " + std::to_string(n) + " but the file holds " +
                   std::to_string(n2) + " samples: a changed byte in the header)";
        return false;
      }
    }
    *problem = !fits || bytes.size() < want
                   ? "truncated (" + size + "; its sample count " + std::to_string(n) +
                         " needs " + (fits ? std::to_string(want) + " bytes" : "more") + ")"
                   : "corrupt (" + size + " but its sample count " + std::to_string(n) +
                         " needs " + std::to_string(want) + ": trailing bytes)";
    return false;
  }
  uint32_t crc = 0;
  std::memcpy(&crc, bytes.data() + bytes.size() - 4, 4);
  const uint32_t got = crc32c(bytes.data(), bytes.size() - 4);
  if (crc != got) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "corrupt (CRC-32C %08x of its contents, %08x recorded)", got,
                  crc);
    *problem = buf;
    return false;
  }
  index->dataset.resize(n);
  index->sample.resize(n);
  std::memcpy(index->dataset.data(), bytes.data() + head + 8, n * 2);
  std::memcpy(index->sample.data(), bytes.data() + head + 8 + n * 2, n * 8);
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
