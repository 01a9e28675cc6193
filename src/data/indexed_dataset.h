// Megatron-LM's indexed dataset (megatron/core/datasets/indexed_dataset.py),
// byte-compatible: <prefix>.bin holds the raw tokens of every sequence back to
// back; <prefix>.idx is
//   9 bytes  magic "MMIDIDX\0\0"
//   uint64   version (1)
//   uint8    dtype code (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
//            6 float64, 7 float32, 8 uint16)
//   uint64   S = sequence count
//   uint64   D = document-index length (documents + 1; starts with 0)
//   int32[S] sequence lengths (tokens)
//   int64[S] sequence pointers (byte offsets into .bin)
//   int64[D] document indices (sequence index where each document starts,
//            last entry = S)
// all little-endian. The reader maps both files and validates every count,
// size and offset before it trusts any of them; the writer writes to temp
// names and renames them at the end, so a crash never leaves a half dataset.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "data/low_level_dataset.h"

namespace mt {

enum class TokenDType : uint8_t {
  kUInt8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,
  kFloat32 = 7,
  kUInt16 = 8,
};

// Bytes per element of a dtype; throws mt::Error on an unknown code.
int dtype_size(TokenDType dtype);
const char* dtype_name(TokenDType dtype);
// Megatron's DType.optimal_dtype: uint16 when vocab_size < 65500, else int32.
TokenDType optimal_token_dtype(int64_t vocab_size);

inline constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr uint64_t kIndexVersion = 1;
inline constexpr int64_t kIndexHeaderBytes = 9 + 8 + 1 + 8 + 8;  // = 34

// Throws the project's token-range error if any of ids[0, n) is < 0 or
// >= vocab_size; `where` names the data (e.g. "sequence 12 of data/x").
void check_token_span(const int32_t* ids, int64_t n, int64_t vocab_size, const std::string& where);

// A read-only memory map of a whole file (empty files map to nothing).
class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const unsigned char* data_ = nullptr;
  int64_t size_ = 0;
};

class IndexedDataset final : public LowLevelDataset {
 public:
  // Opens <path_prefix>.idx and <path_prefix>.bin (both memory-mapped) and
  // validates them; every inconsistency throws mt::Error naming file and value.
  explicit IndexedDataset(const std::string& path_prefix);

  const std::string& path_prefix() const override { return prefix_; }
  TokenDType dtype() const { return dtype_; }
  int64_t num_sequences() const override { return lengths_.size(); }
  // Documents = document-index length - 1.
  int64_t num_documents() const { return doc_index_.size() - 1; }
  int64_t num_tokens() const { return num_tokens_; }
  int32_t sequence_length(int64_t i) const;
  int64_t sequence_pointer(int64_t i) const;
  UnalignedArray<int32_t> sequence_lengths() const override { return lengths_; }
  // Megatron's document_indices: D entries, [0, ..., num_sequences].
  UnalignedArray<int64_t> document_indices() const { return doc_index_; }

  // out[0, n) = tokens [offset, offset + n) of sequence i, converted to int32
  // (out: (n,)). Checks the range against the sequence length.
  void read(int64_t i, int64_t offset, int64_t n, int32_t* out) const override;

  // Scans every token once and throws on the first id < 0 or >= vocab_size,
  // naming the id, the sequence and the vocabulary size.
  void validate_token_range(int64_t vocab_size) const;

 private:
  std::string prefix_;
  MappedFile idx_, bin_;
  TokenDType dtype_ = TokenDType::kUInt16;
  int elem_size_ = 2;
  int64_t num_tokens_ = 0;
  UnalignedArray<int32_t> lengths_;
  UnalignedArray<int64_t> pointers_;
  UnalignedArray<int64_t> doc_index_;
};

// Writes a dataset the way Megatron's IndexedDatasetBuilder does
// (add_item + end_document). Tokens go to <prefix>.bin.tmp as they arrive; the
// index is kept in memory (12 bytes per sequence) and written by finalize(),
// which then renames both temp files into place. Destroying an unfinalized
// writer removes its temp files.
class IndexedDatasetWriter {
 public:
  IndexedDatasetWriter(const std::string& path_prefix, TokenDType dtype);
  ~IndexedDatasetWriter();
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  // One sequence holding `tokens`, then a document boundary.
  void add_document(std::span<const int32_t> tokens);
  // Streaming form: append tokens to the open sequence (opening one if
  // needed), close it with end_sequence(); end_document() closes an open
  // sequence and records a document boundary (a document may hold zero
  // sequences, as Megatron's preprocess writes for empty texts).
  void append(std::span<const int32_t> tokens);
  void end_sequence();
  void end_document();
  // Writes the .idx, renames <prefix>.bin.tmp/.idx.tmp to <prefix>.bin/.idx.
  void finalize();

  TokenDType dtype() const { return dtype_; }
  int64_t num_sequences() const { return int64_t(lengths_.size()); }
  int64_t num_documents() const { return int64_t(doc_index_.size()) - 1; }
  int64_t num_tokens() const { return num_tokens_; }

 private:
  void write_bytes(const void* p, size_t n, const std::string& path);

  std::string prefix_;
  TokenDType dtype_;
  int elem_size_;
  std::FILE* bin_ = nullptr;
  bool open_sequence_ = false;
  bool finalized_ = false;
  int64_t open_length_ = 0;
  int64_t num_tokens_ = 0;
  std::vector<int32_t> lengths_;
  std::vector<int64_t> doc_index_{0};
  std::vector<unsigned char> buf_;  // conversion buffer
};

}  // namespace mt
