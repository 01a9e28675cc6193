// The Hugging Face safetensors format, written and read without Python:
//
//   [8 bytes] N, little-endian uint64: length of the JSON header
//   [N bytes] JSON {"name": {"dtype": "F32", "shape": [2, 3],
//                            "data_offsets": [begin, end]}, ...,
//                   "__metadata__": {"key": "value", ...}}
//             padded with spaces so that 8 + N is a multiple of 8
//   [rest]    the data section; offsets are relative to its start, tensors are
//             row-major, little-endian, packed with no gaps.
//
// The writer lays tensors out by element size (largest first) then name, as
// the reference implementation does, so every tensor starts aligned to its
// element size. The reader maps the file and checks everything before it
// trusts an offset (header length against file size, JSON, dtypes, shapes,
// offsets inside the data section, no overlaps or gaps, size = numel * dtype
// size); every failure is an mt::Error naming the file and what is wrong.
//
// Checksums: the writer records every tensor's CRC-32C (checkpoint/crc32c.h)
// in the metadata, "crc32c" = JSON {"<name>": "<8 hex digits>"}, and returns
// the whole file's CRC-32C. The reader checks a tensor's bytes against its
// recorded CRC the first time they are read (raw(), read_f32()), so a flipped
// byte is an error naming the file and the tensor, never loaded silently;
// check_file() checks the length and the whole-file CRC recorded elsewhere
// (a checkpoint's meta.json) from the header alone, without reading the data:
// the file's CRC is combined from the header's and the recorded tensor CRCs.
// Files without "crc32c" (foreign or older files) are read unchecked.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace mt {

// Element types of safetensors, by their header names ("F32", "BF16", ...).
enum class StDType : uint8_t {
  kBool,
  kU8,
  kI8,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kI64,
  kU64,
  kF64
};

const char* st_dtype_name(StDType t);
size_t st_dtype_size(StDType t);
// Parses a header name; returns false for an unknown one.
bool st_dtype_from_name(const std::string& name, StDType* out);
// The safetensors type of a core tensor type (F32 -> F32, BF16 -> BF16).
StDType st_dtype_of(DType t);

struct StTensorInfo {
  StDType dtype = StDType::kF32;
  bool has_crc32c = false;  // the header records its CRC-32C
  uint32_t crc32c = 0;
  std::vector<int64_t> shape;  // empty = scalar (one element)
  uint64_t begin = 0;          // byte offsets within the data section
  uint64_t end = 0;
  int64_t numel() const;
  size_t bytes() const { return size_t(end - begin); }
  std::string shape_str() const;  // "(2, 3)"
};

// "(2, 3)" for any list of dimensions.
std::string shape_to_string(const std::vector<int64_t>& shape);

class SafetensorsWriter {
 public:
  // Registers a tensor. `data` holds numel * dtype size bytes and must stay
  // valid until write(); nothing is copied before then.
  void add(const std::string& name, StDType dtype, std::vector<int64_t> shape, const void* data);
  // The same for a core Tensor (its dtype and shape).
  void add(const std::string& name, const Tensor& t);

  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  std::map<std::string, std::string>& metadata() { return metadata_; }
  size_t size() const { return entries_.size(); }

  // Writes the file atomically: "<path>.tmp", fsync, rename, fsync of the
  // directory (see atomic_file.h), with each tensor's CRC-32C in the metadata
  // ("crc32c", reserved). Returns the number of bytes written; the whole
  // file's CRC-32C goes to *file_crc32c when given.
  size_t write(const std::string& path, uint32_t* file_crc32c = nullptr) const;

 private:
  struct Entry {
    std::string name;
    StDType dtype;
    std::vector<int64_t> shape;
    const void* data;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

class SafetensorsReader {
 public:
  SafetensorsReader() = default;
  explicit SafetensorsReader(const std::string& path) { open(path); }
  ~SafetensorsReader();
  SafetensorsReader(SafetensorsReader&& o) noexcept;
  SafetensorsReader& operator=(SafetensorsReader&& o) noexcept;
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  // Maps and validates the file (closing any file opened before).
  void open(const std::string& path);
  void close() noexcept;

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return map_size_; }

  // Whether the header records every tensor's CRC-32C.
  bool has_checksums() const { return has_checksums_; }
  // Checks the tensors' bytes against their recorded CRCs when they are first
  // read (the default), or not (a run that skips verification).
  void set_verify(bool verify) { verify_ = verify; }
  // Appended to checksum errors: what the user should do ("; fix: ...").
  void set_corruption_hint(std::string hint) { hint_ = std::move(hint); }
  // Checks the file's length and CRC-32C against values recorded when it was
  // written (without reading the data: see above); needs has_checksums().
  // Throws naming the file, both values and the hint.
  void check_file(uint64_t expected_size, uint32_t expected_crc32c) const;
  // Checks tensor `name`'s bytes against its recorded CRC now (once; a no-op
  // when it has none or verification is off).
  void verify_tensor(const std::string& name) const;

  // Tensor names, sorted.
  std::vector<std::string> names() const;
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  // Throws naming the file and the missing tensor.
  const StTensorInfo& info(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Metadata value or `fallback` when the key is absent.
  std::string metadata_or(const std::string& key, const std::string& fallback) const;

  // The tensor's bytes inside the mapping (info(name).bytes() of them); valid
  // while the reader is open. Not necessarily aligned for foreign files.
  const void* raw(const std::string& name) const;

  // Copies the tensor into dst as float32 (converting from BF16, F16 or F64).
  // Fails, naming the file, the tensor, expected and actual, when its element
  // count differs from `expected_numel` or its dtype is not a float type.
  void read_f32(const std::string& name, float* dst, int64_t expected_numel) const;
  // The same, but the whole shape must match.
  void read_f32(const std::string& name, float* dst,
                const std::vector<int64_t>& expected_shape) const;

  // Lets the pages of tensor `name` leave this process's resident memory
  // (madvise MADV_DONTNEED on the whole pages inside its bytes; the kernel's
  // page cache keeps them, and a later read maps them back in). A reader that
  // streams a large file tensor by tensor then holds about one tensor, not
  // the whole file (the converter's peak memory).
  void release_pages(const std::string& name) const;

 private:
  void parse_header(const char* json, size_t len, uint64_t data_size);
  void parse_checksums(const std::string& text);

  std::string path_;
  const unsigned char* map_ = nullptr;  // whole file, read-only
  size_t map_size_ = 0;
  size_t data_start_ = 0;  // 8 + N
  std::map<std::string, StTensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
  bool has_checksums_ = false;
  bool verify_ = true;
  std::string hint_ = "; fix: restore the file from an intact copy";
  mutable std::map<std::string, bool> verified_;  // tensors whose bytes were checked
};

}  // namespace mt
