#include "data/indexed_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <limits>
#include <type_traits>

#include "core/error.h"
#include "core/file_kind.h"
#include "core/mapped_regions.h"

namespace mt {

namespace {

constexpr const char* kFixPreprocess =
    "; fix: re-create the dataset with `megatron preprocess` (or Megatron-LM's "
    "tools/preprocess_data.py)";

template <typename T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Converts one stored element to an int32 token id, refusing values that do
// not fit (int64 overflow, non-integral floats).
template <typename T>
int32_t to_id(T v, const std::string& where) {
  if constexpr (std::is_floating_point_v<T>) {
    MT_CHECK(std::isfinite(v) && v == std::floor(v) && v >= -2147483648.0 && v <= 2147483647.0,
             where, ": stored value ", v, " is not an int32 token id", kFixPreprocess);
  } else if constexpr (sizeof(T) > 4 || std::is_same_v<T, uint32_t>) {
    MT_CHECK(v >= T(std::numeric_limits<int32_t>::min()) &&
                 v <= T(std::numeric_limits<int32_t>::max()),
             where, ": stored value ", int64_t(v), " does not fit an int32 token id",
             kFixPreprocess);
  }
  return int32_t(v);
}

template <typename T>
void convert_in(const unsigned char* src, int64_t n, int32_t* out, const std::string& where) {
  for (int64_t j = 0; j < n; ++j) out[j] = to_id(load<T>(src + j * int64_t(sizeof(T))), where);
}

template <typename T>
void convert_out(const int32_t* src, int64_t n, unsigned char* out, const std::string& where) {
  for (int64_t j = 0; j < n; ++j) {
    const int32_t id = src[j];
    if constexpr (std::is_integral_v<T> && sizeof(T) < 4) {
      MT_CHECK(id >= int32_t(std::numeric_limits<T>::min()) &&
                   id <= int32_t(std::numeric_limits<T>::max()),
               where, ": token id ", id, " does not fit the dataset dtype (range ",
               int64_t(std::numeric_limits<T>::min()), "..", int64_t(std::numeric_limits<T>::max()),
               "); fix: write with dtype int32 (optimal_token_dtype of the real vocab size)");
    }
    const T v = T(id);
    std::memcpy(out + j * int64_t(sizeof(T)), &v, sizeof(T));
  }
}

// Dispatches F<T> on the dtype.
template <template <typename> class F, typename... Args>
void dispatch(TokenDType dtype, Args&&... args) {
  switch (dtype) {
    case TokenDType::kUInt8: return F<uint8_t>::run(args...);
    case TokenDType::kInt8: return F<int8_t>::run(args...);
    case TokenDType::kInt16: return F<int16_t>::run(args...);
    case TokenDType::kInt32: return F<int32_t>::run(args...);
    case TokenDType::kInt64: return F<int64_t>::run(args...);
    case TokenDType::kFloat64: return F<double>::run(args...);
    case TokenDType::kFloat32: return F<float>::run(args...);
    case TokenDType::kUInt16: return F<uint16_t>::run(args...);
  }
  MT_FAIL("unknown token dtype code ", int(dtype));
}

template <typename T>
struct ReadOp {
  static void run(const unsigned char* src, int64_t n, int32_t* out, const std::string& where) {
    convert_in<T>(src, n, out, where);
  }
};

template <typename T>
struct WriteOp {
  static void run(const int32_t* src, int64_t n, unsigned char* out, const std::string& where) {
    convert_out<T>(src, n, out, where);
  }
};

}  // namespace

int dtype_size(TokenDType dtype) {
  switch (dtype) {
    case TokenDType::kUInt8:
    case TokenDType::kInt8: return 1;
    case TokenDType::kInt16:
    case TokenDType::kUInt16: return 2;
    case TokenDType::kInt32:
    case TokenDType::kFloat32: return 4;
    case TokenDType::kInt64:
    case TokenDType::kFloat64: return 8;
  }
  MT_FAIL("unknown token dtype code ", int(dtype),
          " (Megatron's codes are 1..8); fix: use a dataset written by Megatron's "
          "IndexedDatasetBuilder");
}

const char* dtype_name(TokenDType dtype) {
  switch (dtype) {
    case TokenDType::kUInt8: return "uint8";
    case TokenDType::kInt8: return "int8";
    case TokenDType::kInt16: return "int16";
    case TokenDType::kInt32: return "int32";
    case TokenDType::kInt64: return "int64";
    case TokenDType::kFloat64: return "float64";
    case TokenDType::kFloat32: return "float32";
    case TokenDType::kUInt16: return "uint16";
  }
  return "unknown";
}

TokenDType optimal_token_dtype(int64_t vocab_size) {
  return vocab_size < 65500 ? TokenDType::kUInt16 : TokenDType::kInt32;
}

void check_token_span(const int32_t* ids, int64_t n, int64_t vocab_size, const std::string& where) {
  for (int64_t j = 0; j < n; ++j) {
    MT_CHECK(ids[j] >= 0 && ids[j] < vocab_size, "token id ", ids[j], " at position ", j, " of ",
             where, " is outside the vocabulary of size ", vocab_size,
             "; fix: preprocess the data with the tokenizer the model uses, or raise the "
             "vocabulary size (--vocab-size) to cover it");
  }
}

// ---------------------------------------------------------------- MappedFile

MappedFile::MappedFile(const std::string& path) : path_(path) {
  // Refuse anything but a regular file before opening it: open() of a FIFO
  // blocks until a writer appears (forever), and a device has no size to map.
  struct stat st;
  MT_CHECK(::stat(path.c_str(), &st) == 0, "cannot open ", path, ": ", std::strerror(errno),
           "; fix: check the --data-path prefix (it names <prefix>.bin and <prefix>.idx)");
  MT_CHECK(S_ISREG(st.st_mode), path, " is ", file_kind(st.st_mode),
           ", not a regular file; fix: point --data-path at a dataset written by `megatron "
           "preprocess` (<prefix>.bin and <prefix>.idx must be ordinary files)");
  // O_NONBLOCK: should the path be swapped for a FIFO after the stat, open
  // still returns and the fstat below refuses it (no effect on regular files).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  MT_CHECK(fd >= 0, "cannot open ", path, ": ", std::strerror(errno),
           "; fix: check the --data-path prefix (it names <prefix>.bin and <prefix>.idx)");
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd);
    MT_FAIL("cannot stat ", path, " or it is no longer a regular file: ", std::strerror(err));
  }
  size_ = int64_t(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_t(size_), PROT_READ, MAP_SHARED, fd, 0);
    const int err = errno;
    ::close(fd);
    MT_CHECK(p != MAP_FAILED, "cannot mmap ", path, " (", size_, " bytes): ", std::strerror(err));
    data_ = static_cast<const unsigned char*>(p);
    register_mapped_region(data_, size_t(size_), path);  // a later truncation is named
  } else {
    ::close(fd);
  }
}

MappedFile::~MappedFile() {
  if (data_) {
    unregister_mapped_region(data_);
    ::munmap(const_cast<unsigned char*>(data_), size_t(size_));
  }
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)), data_(o.data_), size_(o.size_) {
  o.data_ = nullptr;
  o.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (data_) {
      unregister_mapped_region(data_);
      ::munmap(const_cast<unsigned char*>(data_), size_t(size_));
    }
    path_ = std::move(o.path_);
    data_ = o.data_;
    size_ = o.size_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

// ------------------------------------------------------------ IndexedDataset

IndexedDataset::IndexedDataset(const std::string& path_prefix)
    : prefix_(path_prefix), idx_(path_prefix + ".idx"), bin_(path_prefix + ".bin") {
  const std::string& ip = idx_.path();
  const unsigned char* p = idx_.data();
  const int64_t idx_size = idx_.size();
  MT_CHECK(idx_size >= kIndexHeaderBytes, ip, ": file is ", idx_size,
           " bytes, shorter than the 34-byte MMIDIDX header (truncated?)", kFixPreprocess);
  MT_CHECK(std::memcmp(p, kIndexMagic, 9) == 0, ip,
           ": bad magic (expected \"MMIDIDX\\0\\0\"); not a Megatron indexed dataset index",
           kFixPreprocess);
  const uint64_t version = load<uint64_t>(p + 9);
  MT_CHECK(version == kIndexVersion, ip, ": index version ", version,
           " is not supported (only version 1)", kFixPreprocess);
  const uint8_t code = p[17];
  MT_CHECK(code >= 1 && code <= 8, ip, ": dtype code ", int(code),
           " is not one of Megatron's codes 1..8", kFixPreprocess);
  dtype_ = TokenDType(code);
  elem_size_ = dtype_size(dtype_);
  const uint64_t seqs = load<uint64_t>(p + 18);
  const uint64_t docs = load<uint64_t>(p + 26);
  // Bound each count by the file size before multiplying, so no overflow.
  const uint64_t body = uint64_t(idx_size - kIndexHeaderBytes);
  MT_CHECK(seqs <= body / 12 && docs <= body / 8, ip, ": header claims ", seqs,
           " sequences and ", docs, " document-index entries, more than the ", idx_size,
           "-byte file can hold (truncated?)", kFixPreprocess);
  const uint64_t expected = uint64_t(kIndexHeaderBytes) + seqs * 12 + docs * 8;
  MT_CHECK(uint64_t(idx_size) != expected + seqs || seqs == 0, ip,
           ": index has one extra byte per sequence (Megatron's multimodal sequence modes), "
           "which is not supported; fix: use a text-only dataset");
  MT_CHECK(uint64_t(idx_size) == expected, ip, ": file is ", idx_size, " bytes but its header (",
           seqs, " sequences, ", docs, " document-index entries) implies ", expected,
           " bytes (truncated or corrupted)", kFixPreprocess);
  const unsigned char* q = p + kIndexHeaderBytes;
  lengths_ = UnalignedArray<int32_t>(q, int64_t(seqs));
  pointers_ = UnalignedArray<int64_t>(q + seqs * 4, int64_t(seqs));
  doc_index_ = UnalignedArray<int64_t>(q + seqs * 12, int64_t(docs));

  // Pointers: 0, then each = previous + previous length * element size.
  int64_t next = 0;
  for (int64_t i = 0; i < int64_t(seqs); ++i) {
    const int32_t len = lengths_[i];
    MT_CHECK(len >= 0, ip, ": sequence ", i, " has negative length ", len, kFixPreprocess);
    const int64_t ptr = pointers_[i];
    MT_CHECK(ptr == next, ip, ": sequence ", i, " pointer is ", ptr, " but the lengths before it ",
             "imply byte offset ", next, " (pointers inconsistent with lengths)", kFixPreprocess);
    // A corrupt index can claim enough long sequences to overflow the sum
    // (2^31 tokens x 8 bytes each); that is UB, so check it.
    MT_CHECK(!__builtin_add_overflow(next, int64_t(len) * elem_size_, &next), ip, ": sequence ", i,
             " of ", len, " tokens takes the total past 2^63 bytes (corrupted lengths)",
             kFixPreprocess);
  }
  num_tokens_ = next / elem_size_;
  MT_CHECK(bin_.size() == next, bin_.path(), ": file is ", bin_.size(), " bytes but ", ip,
           " describes ", num_tokens_, " tokens x ", elem_size_, " bytes (", dtype_name(dtype_),
           ") = ", next, " bytes (truncated, or .bin and .idx from different runs)",
           kFixPreprocess);

  // Document index: starts at 0, non-decreasing, ends at the sequence count.
  MT_CHECK(docs >= 1, ip, ": document index is empty (it must hold at least the leading 0)",
           kFixPreprocess);
  MT_CHECK(doc_index_[0] == 0, ip, ": document index starts at ", doc_index_[0], ", not 0",
           kFixPreprocess);
  for (int64_t d = 1; d < int64_t(docs); ++d) {
    MT_CHECK(doc_index_[d] >= doc_index_[d - 1], ip, ": document index entry ", d, " (",
             doc_index_[d], ") is smaller than entry ", d - 1, " (", doc_index_[d - 1], ")",
             kFixPreprocess);
  }
  MT_CHECK(doc_index_[int64_t(docs) - 1] == int64_t(seqs), ip, ": document index ends at ",
           doc_index_[int64_t(docs) - 1], " but there are ", seqs, " sequences", kFixPreprocess);
}

int32_t IndexedDataset::sequence_length(int64_t i) const {
  MT_CHECK(i >= 0 && i < num_sequences(), "sequence ", i, " out of range [0, ", num_sequences(),
           ") in ", prefix_);
  return lengths_[i];
}

int64_t IndexedDataset::sequence_pointer(int64_t i) const {
  MT_CHECK(i >= 0 && i < num_sequences(), "sequence ", i, " out of range [0, ", num_sequences(),
           ") in ", prefix_);
  return pointers_[i];
}

void IndexedDataset::read(int64_t i, int64_t offset, int64_t n, int32_t* out) const {
  const int64_t len = sequence_length(i);
  MT_CHECK(offset >= 0 && n >= 0 && offset <= len && n <= len - offset, "read of ", n,
           " tokens at offset ", offset, " outside sequence ", i, " of length ", len, " in ",
           prefix_);
  if (n == 0) return;
  const unsigned char* src = bin_.data() + pointers_[i] + offset * elem_size_;
  dispatch<ReadOp>(dtype_, src, n, out, bin_.path());
}

// Branch-free min/max per sequence (vectorises), sequences over OpenMP
// threads. 1 GiB of uint16 tokens from page cache: 0.08-0.1 s (0.53 s in a
// fresh process, mostly page faults of the new mapping), against 0.3 s (0.8)
// for a compare-and-throw loop; memory-bound, so 2 threads ~ 1 here. The first
// bad sequence is then re-read for the message. Sequences are read in chunks,
// so a huge one never needs a huge buffer; a value that is no token id at all
// (float, int64 overflow) makes read() throw, which must not escape an OpenMP
// region (std::terminate; found by tests/fuzz/fuzz_indexed_dataset): it marks
// the sequence bad and the serial re-read below throws the message.
void IndexedDataset::validate_token_range(int64_t vocab_size) const {
  constexpr int64_t kChunk = 1 << 16;
  const int64_t n = num_sequences();
  int64_t first_bad = n;
#pragma omp parallel
  {
    std::vector<int32_t> buf(kChunk);
#pragma omp for schedule(dynamic, 256) reduction(min : first_bad)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t len = lengths_[i];
      int32_t lo = 0, hi = 0;
      try {
        for (int64_t beg = 0; beg < len; beg += kChunk) {
          const int64_t m = std::min(kChunk, len - beg);
          read(i, beg, m, buf.data());
          for (int64_t j = 0; j < m; ++j) {
            lo = std::min(lo, buf[j]);
            hi = std::max(hi, buf[j]);
          }
        }
      } catch (const Error&) {
        lo = -1;
      }
      if (lo < 0 || hi >= vocab_size) first_bad = std::min(first_bad, i);
    }
  }
  if (first_bad == n) return;
  const int64_t i = first_bad, len = lengths_[i];
  int64_t doc = 0;  // the document holding sequence i: last doc_index_ entry <= i
  for (int64_t lo = 0, hi = doc_index_.size() - 1; lo < hi;) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (doc_index_[mid] <= i) lo = doc = mid; else hi = mid - 1;
  }
  std::vector<int32_t> buf(kChunk);
  for (int64_t beg = 0; beg < len; beg += kChunk) {
    const int64_t m = std::min(kChunk, len - beg);
    read(i, beg, m, buf.data());
    for (int64_t j = 0; j < m; ++j)
      MT_CHECK(buf[j] >= 0 && buf[j] < vocab_size, "token id ", buf[j], " in sequence ", i,
               " (document ", doc, ", position ", beg + j, ") of ", bin_.path(),
               " is outside the vocabulary of size ", vocab_size,
               "; fix: preprocess the data with the tokenizer the model uses, or raise the "
               "vocabulary size (--vocab-size) to cover it");
  }
  MT_FAIL(bin_.path(), ": sequence ", i, " failed the token check but reads clean on a second "
          "pass (was the file modified while open?)");
}

// ------------------------------------------------------ IndexedDatasetWriter

IndexedDatasetWriter::IndexedDatasetWriter(const std::string& path_prefix, TokenDType dtype)
    : prefix_(path_prefix), dtype_(dtype), elem_size_(dtype_size(dtype)) {
  const std::string tmp = prefix_ + ".bin.tmp";
  bin_ = std::fopen(tmp.c_str(), "wb");
  MT_CHECK(bin_ != nullptr, "cannot create ", tmp, ": ", std::strerror(errno),
           "; fix: check that the output directory exists and is writable");
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (bin_) std::fclose(bin_);
  if (!finalized_) {
    std::remove((prefix_ + ".bin.tmp").c_str());
    std::remove((prefix_ + ".idx.tmp").c_str());
  }
}

void IndexedDatasetWriter::write_bytes(const void* p, size_t n, const std::string& path) {
  MT_CHECK(std::fwrite(p, 1, n, bin_) == n, "write of ", n, " bytes to ", path, " failed: ",
           std::strerror(errno), "; fix: check free disk space");
}

void IndexedDatasetWriter::append(std::span<const int32_t> tokens) {
  MT_CHECK(!finalized_, "append after finalize on ", prefix_);
  open_sequence_ = true;
  constexpr int64_t kChunk = 1 << 16;
  const std::string tmp = prefix_ + ".bin.tmp";
  for (int64_t beg = 0; beg < int64_t(tokens.size()); beg += kChunk) {
    const int64_t n = std::min<int64_t>(kChunk, int64_t(tokens.size()) - beg);
    buf_.resize(size_t(n * elem_size_));
    dispatch<WriteOp>(dtype_, tokens.data() + beg, n, buf_.data(), tmp);
    write_bytes(buf_.data(), buf_.size(), tmp);
  }
  open_length_ += int64_t(tokens.size());
  num_tokens_ += int64_t(tokens.size());
  MT_CHECK(open_length_ <= std::numeric_limits<int32_t>::max(), "sequence ", lengths_.size(),
           " of ", prefix_, " has ", open_length_,
           " tokens, more than the format's int32 length; fix: split the document");
}

void IndexedDatasetWriter::end_sequence() {
  if (!open_sequence_) return;
  lengths_.push_back(int32_t(open_length_));
  open_sequence_ = false;
  open_length_ = 0;
}

void IndexedDatasetWriter::end_document() {
  end_sequence();
  doc_index_.push_back(int64_t(lengths_.size()));
}

void IndexedDatasetWriter::add_document(std::span<const int32_t> tokens) {
  end_sequence();
  append(tokens);
  end_document();
}

void IndexedDatasetWriter::finalize() {
  MT_CHECK(!finalized_, "finalize called twice on ", prefix_);
  MT_CHECK(!open_sequence_, "finalize on ", prefix_,
           " with an open sequence; fix: call end_document() after the last tokens");
  const std::string bin_tmp = prefix_ + ".bin.tmp", idx_tmp = prefix_ + ".idx.tmp";
  MT_CHECK(std::fflush(bin_) == 0 && ::fsync(fileno(bin_)) == 0, "flush of ", bin_tmp,
           " failed: ", std::strerror(errno), "; fix: check free disk space");
  MT_CHECK(std::fclose(bin_) == 0, "close of ", bin_tmp, " failed: ", std::strerror(errno));
  bin_ = nullptr;

  std::FILE* f = std::fopen(idx_tmp.c_str(), "wb");
  MT_CHECK(f != nullptr, "cannot create ", idx_tmp, ": ", std::strerror(errno));
  std::vector<unsigned char> out;
  const uint64_t seqs = lengths_.size(), docs = doc_index_.size();
  out.reserve(size_t(kIndexHeaderBytes + seqs * 12 + docs * 8));
  auto put = [&](const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    out.insert(out.end(), b, b + n);
  };
  const uint8_t code = uint8_t(dtype_);
  put(kIndexMagic, 9);
  put(&kIndexVersion, 8);
  put(&code, 1);
  put(&seqs, 8);
  put(&docs, 8);
  put(lengths_.data(), seqs * 4);
  int64_t ptr = 0;
  for (int32_t len : lengths_) {
    put(&ptr, 8);
    ptr += int64_t(len) * elem_size_;
  }
  put(doc_index_.data(), docs * 8);
  const bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size() &&
                  std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  const int err = errno;
  std::fclose(f);
  MT_CHECK(ok, "write of ", idx_tmp, " failed: ", std::strerror(err),
           "; fix: check free disk space");

  // An old .idx beside a new .bin would look valid-but-wrong: drop it first,
  // then move the .bin, then the .idx (whose presence marks completion).
  std::remove((prefix_ + ".idx").c_str());
  MT_CHECK(std::rename(bin_tmp.c_str(), (prefix_ + ".bin").c_str()) == 0, "rename ", bin_tmp,
           " failed: ", std::strerror(errno));
  MT_CHECK(std::rename(idx_tmp.c_str(), (prefix_ + ".idx").c_str()) == 0, "rename ", idx_tmp,
           " failed: ", std::strerror(errno));
  finalized_ = true;
}

}  // namespace mt
