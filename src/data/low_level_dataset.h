// What a GPTDataset reads documents from (Megatron's LowLevelDataset): an
// IndexedDataset (.bin/.idx, data/indexed_dataset.h) or the mock documents of
// --mock-data (data/mock_gpt_dataset.h). One virtual call per document read,
// not per token.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace mt {

// A read-only view of a little-endian array at an arbitrary (possibly
// unaligned) byte address: inside a mapped file, or over a vector's data.
template <typename T>
class UnalignedArray {
 public:
  UnalignedArray() = default;
  UnalignedArray(const unsigned char* data, int64_t size) : data_(data), size_(size) {}
  int64_t size() const { return size_; }
  T operator[](int64_t i) const {
    T v;
    std::memcpy(&v, data_ + i * int64_t(sizeof(T)), sizeof(T));
    return v;
  }

 private:
  const unsigned char* data_ = nullptr;
  int64_t size_ = 0;
};

class LowLevelDataset {
 public:
  virtual ~LowLevelDataset() = default;
  // For messages: the .bin/.idx prefix, or what the documents are.
  virtual const std::string& path_prefix() const = 0;
  virtual int64_t num_sequences() const = 0;
  // Tokens of each sequence (num_sequences,).
  virtual UnalignedArray<int32_t> sequence_lengths() const = 0;
  // out[0, n) = tokens [offset, offset + n) of sequence i, as int32 (out: (n,)).
  virtual void read(int64_t i, int64_t offset, int64_t n, int32_t* out) const = 0;
};

}  // namespace mt
