#include "checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>

#include "checkpoint/atomic_file.h"
#include "checkpoint/crc32c.h"
#include "core/error.h"
#include "core/file_kind.h"
#include "core/mapped_regions.h"

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host needs byte swapping");

namespace mt {
namespace {

// The reference implementation refuses headers over 100 MB; so do we, so that
// a corrupt length never makes us parse gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100u * 1000 * 1000;
constexpr const char* kMetadataKey = "__metadata__";
constexpr const char* kCrcKey = "crc32c";  // metadata: {"<tensor>": "<8 hex digits>"}

struct DTypeEntry {
  StDType type;
  const char* name;
  size_t size;
};
constexpr DTypeEntry kDTypes[] = {
    {StDType::kBool, "BOOL", 1}, {StDType::kU8, "U8", 1},   {StDType::kI8, "I8", 1},
    {StDType::kI16, "I16", 2},   {StDType::kU16, "U16", 2}, {StDType::kF16, "F16", 2},
    {StDType::kBF16, "BF16", 2}, {StDType::kI32, "I32", 4}, {StDType::kU32, "U32", 4},
    {StDType::kF32, "F32", 4},   {StDType::kI64, "I64", 8}, {StDType::kU64, "U64", 8},
    {StDType::kF64, "F64", 8},
};

const DTypeEntry& dtype_entry(StDType t) {
  for (const DTypeEntry& e : kDTypes)
    if (e.type == t) return e;
  MT_FAIL("unknown safetensors dtype code ", int(t));
}

// numel of a shape, or -1 on a negative dimension or int64 overflow.
int64_t checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  }
  return n;
}

// A header value for an error message: at most ~80 characters, and never a
// recursive dump() of nested values (a corrupt header can nest a million
// levels deep in 2 MB, and dump() recurses once per level: stack overflow).
std::string brief(const nlohmann::json& j) {
  bool flat = true;
  if (j.is_structured())
    for (const nlohmann::json& e : j) flat = flat && !e.is_structured();
  std::string s = flat ? j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                       : std::string(j.is_array() ? "[[...]]" : "{...}");
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {  // inf / nan
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {  // normal
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {  // zero
    bits = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    bits = sign | (uint32_t(112 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

}  // namespace

const char* st_dtype_name(StDType t) { return dtype_entry(t).name; }
size_t st_dtype_size(StDType t) { return dtype_entry(t).size; }

bool st_dtype_from_name(const std::string& name, StDType* out) {
  for (const DTypeEntry& e : kDTypes) {
    if (name == e.name) {
      *out = e.type;
      return true;
    }
  }
  return false;
}

StDType st_dtype_of(DType t) { return t == DType::kF32 ? StDType::kF32 : StDType::kBF16; }

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + ")";
}

int64_t StTensorInfo::numel() const { return checked_numel(shape); }
std::string StTensorInfo::shape_str() const { return shape_to_string(shape); }

// ---------------------------------------------------------------- writer

void SafetensorsWriter::add(const std::string& name, StDType dtype, std::vector<int64_t> shape,
                            const void* data) {
  MT_CHECK(!name.empty() && name != kMetadataKey, "safetensors: invalid tensor name '", name,
           "'; fix: use a non-empty name other than ", kMetadataKey);
  for (const Entry& e : entries_)
    MT_CHECK(e.name != name, "safetensors: tensor '", name, "' added twice");
  const int64_t n = checked_numel(shape);
  MT_CHECK(n >= 0, "safetensors: tensor '", name, "' has an invalid shape ",
           shape_to_string(shape));
  MT_CHECK(n == 0 || data != nullptr, "safetensors: tensor '", name, "' of shape ",
           shape_to_string(shape), " has no data (null pointer)");
  entries_.push_back({name, dtype, std::move(shape), data});
}

void SafetensorsWriter::add(const std::string& name, const Tensor& t) {
  MT_CHECK(t.ndim >= 1, "safetensors: tensor '", name, "' is empty (ndim 0)");
  add(name, st_dtype_of(t.dtype), std::vector<int64_t>(t.shape, t.shape + t.ndim), t.data);
}

size_t SafetensorsWriter::write(const std::string& path, uint32_t* file_crc32c) const {
  MT_CHECK(metadata_.count(kCrcKey) == 0, "safetensors: metadata key '", kCrcKey,
           "' is reserved for the tensors' checksums; fix: use another key");
  // Layout: largest element size first, then by name (as the reference
  // implementation), so every tensor is aligned to its element size.
  std::vector<const Entry*> order;
  for (const Entry& e : entries_) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    const size_t sa = st_dtype_size(a->dtype), sb = st_dtype_size(b->dtype);
    return sa != sb ? sa > sb : a->name < b->name;
  });
  auto bytes_of = [](const Entry* e) {
    return uint64_t(checked_numel(e->shape)) * st_dtype_size(e->dtype);
  };
  // The tensors' CRCs go into the header, so they are computed from memory
  // before anything is written (one extra pass over memory, not the file).
  std::vector<uint32_t> crcs;
  nlohmann::ordered_json crc_json = nlohmann::ordered_json::object();
  for (const Entry* e : order) {
    crcs.push_back(crc32c_parallel(e->data, size_t(bytes_of(e))));
    crc_json[e->name] = crc32c_hex(crcs.back());
  }

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  for (const auto& [k, v] : metadata_) meta[k] = v;
  meta[kCrcKey] = crc_json.dump();  // "{}" without tensors: still a checked file
  if (!meta.empty()) header[kMetadataKey] = std::move(meta);
  uint64_t offset = 0;
  for (const Entry* e : order) {
    const uint64_t bytes = bytes_of(e);
    header[e->name] = {{"dtype", st_dtype_name(e->dtype)},
                       {"shape", e->shape},
                       {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  const uint64_t n = json.size();

  AtomicFileWriter out(path);
  out.write(&n, sizeof(n));  // little-endian host (static_assert above)
  out.write(json.data(), json.size());
  uint32_t crc = crc32c_extend(crc32c(&n, sizeof(n)), json.data(), json.size());
  for (size_t i = 0; i < order.size(); ++i) {
    out.write(order[i]->data, size_t(bytes_of(order[i])));
    crc = crc32c_combine(crc, crcs[i], bytes_of(order[i]));
  }
  out.commit();
  if (file_crc32c != nullptr) *file_crc32c = crc;
  return out.bytes_written();
}

// ---------------------------------------------------------------- reader

SafetensorsReader::~SafetensorsReader() { close(); }

SafetensorsReader::SafetensorsReader(SafetensorsReader&& o) noexcept { *this = std::move(o); }

SafetensorsReader& SafetensorsReader::operator=(SafetensorsReader&& o) noexcept {
  if (this != &o) {
    close();
    path_ = std::move(o.path_);
    map_ = std::exchange(o.map_, nullptr);
    map_size_ = std::exchange(o.map_size_, 0);
    data_start_ = std::exchange(o.data_start_, 0);
    tensors_ = std::move(o.tensors_);
    metadata_ = std::move(o.metadata_);
    has_checksums_ = std::exchange(o.has_checksums_, false);
    verify_ = o.verify_;
    hint_ = std::move(o.hint_);
    verified_ = std::move(o.verified_);
  }
  return *this;
}

void SafetensorsReader::close() noexcept {
  if (map_ != nullptr) {
    unregister_mapped_region(map_);
    ::munmap(const_cast<unsigned char*>(map_), map_size_);
  }
  map_ = nullptr;
  map_size_ = 0;
  data_start_ = 0;
  tensors_.clear();
  metadata_.clear();
  has_checksums_ = false;
  verified_.clear();
}

void SafetensorsReader::open(const std::string& path) {
  close();
  path_ = path;
  // Refuse anything but a regular file before opening it: open() of a FIFO
  // blocks until a writer comes (forever). O_NONBLOCK covers a swap between
  // the stat and the open; the fstat then refuses it.
  struct stat st {};
  MT_CHECK(::stat(path.c_str(), &st) == 0, "safetensors '", path, "': cannot open: ",
           std::strerror(errno), "; fix: check the checkpoint path");
  MT_CHECK(S_ISREG(st.st_mode), "safetensors '", path, "' is ", file_kind(st.st_mode),
           ", not a regular file; fix: check the checkpoint path");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  MT_CHECK(fd >= 0, "safetensors '", path, "': cannot open: ", std::strerror(errno),
           "; fix: check the checkpoint path");
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    MT_FAIL("safetensors '", path, "': not a regular file");
  }
  const uint64_t file_size = uint64_t(st.st_size);
  if (file_size < 8) {
    ::close(fd);
    MT_FAIL("safetensors '", path, "': truncated: the file has ", file_size,
            " bytes, fewer than the 8-byte header length");
  }
  void* m = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  MT_CHECK(m != MAP_FAILED, "safetensors '", path, "': mmap of ", file_size,
           " bytes failed: ", std::strerror(err));
  map_ = static_cast<const unsigned char*>(m);
  map_size_ = file_size;
  register_mapped_region(map_, map_size_, path);  // a later truncation is named

  try {
    uint64_t n = 0;
    std::memcpy(&n, map_, 8);
    MT_CHECK(n <= file_size - 8, "safetensors '", path, "': truncated or corrupt: header length ",
             n, " exceeds the ", file_size - 8, " bytes after the length prefix");
    MT_CHECK(n >= 2 && n <= kMaxHeaderBytes, "safetensors '", path,
             "': corrupt header: header length ", n, " is not in [2, ", kMaxHeaderBytes, "]");
    data_start_ = 8 + n;
    parse_header(reinterpret_cast<const char*>(map_ + 8), n, file_size - data_start_);
  } catch (...) {
    close();
    throw;
  }
}

void SafetensorsReader::parse_header(const char* json, size_t len, uint64_t data_size) {
  const std::string& p = path_;
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(json, json + len);
  } catch (const nlohmann::json::exception& e) {
    MT_FAIL("safetensors '", p, "': corrupt header: invalid JSON (", e.what(), ")");
  }
  MT_CHECK(h.is_object(), "safetensors '", p, "': corrupt header: not a JSON object");

  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == kMetadataKey) {
      MT_CHECK(v.is_object(), "safetensors '", p, "': corrupt header: ", kMetadataKey,
               " is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        MT_CHECK(m.value().is_string(), "safetensors '", p, "': corrupt header: metadata '",
                 m.key(), "' is not a string");
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = "safetensors '" + p + "': tensor '" + name + "'";
    MT_CHECK(
        v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
        where, ": corrupt header: needs dtype, shape and data_offsets");
    const nlohmann::json& jd = v["dtype"];
    const nlohmann::json& js = v["shape"];
    const nlohmann::json& jo = v["data_offsets"];
    StTensorInfo info;
    MT_CHECK(jd.is_string() && st_dtype_from_name(jd.get<std::string>(), &info.dtype), where,
             ": corrupt header: unknown dtype ", brief(jd));
    MT_CHECK(js.is_array(), where, ": corrupt header: shape is not an array");
    for (const nlohmann::json& d : js) {
      MT_CHECK(d.is_number_unsigned(), where, ": corrupt header: shape ", brief(js),
               " has a non-integer or negative dimension");
      info.shape.push_back(d.get<int64_t>());
    }
    MT_CHECK(
        jo.is_array() && jo.size() == 2 && jo[0].is_number_unsigned() && jo[1].is_number_unsigned(),
        where, ": corrupt header: data_offsets ", brief(jo), " is not [begin, end]");
    info.begin = jo[0].get<uint64_t>();
    info.end = jo[1].get<uint64_t>();
    MT_CHECK(info.begin <= info.end, where, ": corrupt header: data_offsets [", info.begin, ", ",
             info.end, "] end before begin");
    const int64_t numel = info.numel();
    MT_CHECK(numel >= 0, where, ": corrupt header: shape ", info.shape_str(), " overflows");
    // numel * dtype size can wrap (shape [2^61] of F64 "needs" 0 bytes): a
    // tensor must not claim more elements than its bytes hold.
    uint64_t want = 0;
    MT_CHECK(!__builtin_mul_overflow(uint64_t(numel), st_dtype_size(info.dtype), &want), where,
             ": corrupt header: shape ", info.shape_str(), " of ", st_dtype_name(info.dtype),
             " needs more than 2^64 bytes");
    MT_CHECK(info.end - info.begin == want, where, ": size mismatch: shape ", info.shape_str(),
             " of ", st_dtype_name(info.dtype), " needs ", want, " bytes (numel ", numel,
             ") but data_offsets [", info.begin, ", ", info.end, "] hold ", info.end - info.begin);
    MT_CHECK(info.end <= data_size, where, ": truncated: data_offsets [", info.begin, ", ",
             info.end, "] run past the data section of ", data_size, " bytes");
    tensors_.emplace(name, std::move(info));
  }

  // The data section must be covered exactly: no overlaps, no gaps, no tail.
  std::vector<std::tuple<uint64_t, uint64_t, const std::string*>> spans;
  for (const auto& [name, info] : tensors_) spans.emplace_back(info.begin, info.end, &name);
  std::sort(spans.begin(), spans.end());
  uint64_t covered = 0;
  const std::string* prev = nullptr;
  for (const auto& [b, e, name] : spans) {
    MT_CHECK(b >= covered, "safetensors '", p, "': corrupt header: tensor '", *name, "' at bytes [",
             b, ", ", e, ") overlaps tensor '", (prev ? *prev : std::string()), "' which ends at ",
             covered);
    MT_CHECK(b == covered, "safetensors '", p, "': corrupt header: gap of ", b - covered,
             " bytes before tensor '", *name, "' (data must be packed)");
    covered = e;
    if (e > b || prev == nullptr) prev = name;
  }
  MT_CHECK(covered == data_size, "safetensors '", p, "': corrupt: the tensors cover ", covered,
           " bytes but the data section has ", data_size, " (trailing bytes)");
  const auto crc = metadata_.find(kCrcKey);
  if (crc != metadata_.end()) parse_checksums(crc->second);
}

void SafetensorsReader::parse_checksums(const std::string& text) {
  const std::string& p = path_;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    MT_FAIL("safetensors '", p, "': corrupt header: metadata '", kCrcKey, "' is not JSON (",
            e.what(), ")", hint_);
  }
  MT_CHECK(j.is_object(), "safetensors '", p, "': corrupt header: metadata '", kCrcKey,
           "' is not an object", hint_);
  for (auto it = j.begin(); it != j.end(); ++it) {
    auto t = tensors_.find(it.key());
    MT_CHECK(t != tensors_.end(), "safetensors '", p, "': corrupt header: metadata '", kCrcKey,
             "' names tensor '", it.key(), "', which the file does not hold", hint_);
    MT_CHECK(it.value().is_string() &&
                 crc32c_from_hex(it.value().get<std::string>(), &t->second.crc32c),
             "safetensors '", p, "': corrupt header: the ", kCrcKey, " of tensor '", it.key(),
             "' is ", brief(it.value()), ", not 8 hex digits", hint_);
    t->second.has_crc32c = true;
  }
  for (const auto& [name, info] : tensors_)
    MT_CHECK(info.has_crc32c, "safetensors '", p, "': corrupt header: tensor '", name,
             "' has no ", kCrcKey, " beside the others'", hint_);
  has_checksums_ = true;
}

void SafetensorsReader::check_file(uint64_t expected_size, uint32_t expected_crc32c) const {
  MT_CHECK(map_size_ == expected_size, "checkpoint file '", path_, "' has ", map_size_,
           " bytes but ", expected_size, " were written (truncated or replaced)", hint_);
  MT_CHECK(has_checksums_, "checkpoint file '", path_, "' has no tensor checksums in its "
           "header but its checkpoint recorded one for the file (replaced by another file)", hint_);
  // The file's CRC from its header bytes and the CRCs the header records for
  // the data, in data order: equal to a pass over the file when the data
  // matches them, which verify_tensor() checks as each tensor is read.
  std::vector<const StTensorInfo*> order;
  for (const auto& kv : tensors_) order.push_back(&kv.second);
  std::sort(order.begin(), order.end(),
            [](const StTensorInfo* a, const StTensorInfo* b) { return a->begin < b->begin; });
  uint32_t crc = crc32c(map_, data_start_);
  for (const StTensorInfo* t : order) crc = crc32c_combine(crc, t->crc32c, t->bytes());
  MT_CHECK(crc == expected_crc32c, "checkpoint file '", path_, "': its header does not match "
           "the checksum recorded when it was written (crc32c ", crc32c_hex(crc), ", expected ",
           crc32c_hex(expected_crc32c), "): the file is damaged or was replaced", hint_);
}

void SafetensorsReader::verify_tensor(const std::string& name) const {
  const StTensorInfo& i = info(name);
  if (!verify_ || !i.has_crc32c) return;
  bool& done = verified_[name];
  if (done) return;
  const uint32_t crc = crc32c_parallel(map_ + data_start_ + i.begin, i.bytes());
  MT_CHECK(crc == i.crc32c, "checkpoint file '", path_, "': tensor '", name,
           "' is corrupt: its bytes have crc32c ", crc32c_hex(crc), " but ",
           crc32c_hex(i.crc32c), " was recorded when it was written", hint_);
  done = true;
}

std::vector<std::string> SafetensorsReader::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& kv : tensors_) out.push_back(kv.first);
  return out;
}

const StTensorInfo& SafetensorsReader::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    std::string some;
    int shown = 0;
    for (const auto& kv : tensors_) {
      if (shown++ == 5) {
        some += ", ...";
        break;
      }
      some += (shown > 1 ? ", " : "") + kv.first;
    }
    MT_FAIL("safetensors '", path_, "': no tensor '", name, "' (it has ", tensors_.size(),
            " tensors: ", some, "); fix: check the checkpoint matches the model config");
  }
  return it->second;
}

std::string SafetensorsReader::metadata_or(const std::string& key,
                                           const std::string& fallback) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? fallback : it->second;
}

const void* SafetensorsReader::raw(const std::string& name) const {
  const StTensorInfo& i = info(name);
  verify_tensor(name);
  return map_ + data_start_ + i.begin;
}

void SafetensorsReader::read_f32(const std::string& name, float* dst,
                                 int64_t expected_numel) const {
  const StTensorInfo& i = info(name);
  const int64_t n = i.numel();
  MT_CHECK(n == expected_numel, "safetensors '", path_, "': tensor '", name, "' has shape ",
           i.shape_str(), " (", n, " elements) but ", expected_numel,
           " were expected; fix: check the model config (sizes, TP/PP) matches the checkpoint");
  verify_tensor(name);
  const unsigned char* src = map_ + data_start_ + i.begin;
  switch (i.dtype) {
    case StDType::kF32:
      std::memcpy(dst, src, size_t(n) * 4);
      break;
    case StDType::kBF16:
    case StDType::kF16:
      for (int64_t k = 0; k < n; ++k) {
        uint16_t h;
        std::memcpy(&h, src + 2 * k, 2);
        dst[k] = i.dtype == StDType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
      }
      break;
    case StDType::kF64:
      for (int64_t k = 0; k < n; ++k) {
        double d;
        std::memcpy(&d, src + 8 * k, 8);
        dst[k] = float(d);
      }
      break;
    default:
      MT_FAIL("safetensors '", path_, "': tensor '", name, "' has dtype ", st_dtype_name(i.dtype),
              ", which cannot be read as F32");
  }
}

void SafetensorsReader::read_f32(const std::string& name, float* dst,
                                 const std::vector<int64_t>& expected_shape) const {
  const StTensorInfo& i = info(name);
  MT_CHECK(i.shape == expected_shape, "safetensors '", path_, "': tensor '", name, "' has shape ",
           i.shape_str(), " but ", shape_to_string(expected_shape),
           " was expected; fix: check the model config (sizes, TP/PP) matches the checkpoint");
  read_f32(name, dst, checked_numel(expected_shape));
}

void SafetensorsReader::release_pages(const std::string& name) const {
  const StTensorInfo& i = info(name);
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t b = uintptr_t(map_ + data_start_ + i.begin), e = b + i.bytes();
  const uintptr_t pb = (b + page - 1) / page * page, pe = e / page * page;
  if (pe > pb) ::madvise(reinterpret_cast<void*>(pb), pe - pb, MADV_DONTNEED);  // advice only
}

}  // namespace mt
