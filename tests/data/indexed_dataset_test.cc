#include "data/indexed_dataset.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>

#include "data/char_tokenizer.h"
#include "data_test_util.h"

namespace mt {
namespace indexed_dataset_test {

using test::error_of;
using test::has;
using test::read_file;
using test::TempDir;
using test::write_file;

std::vector<std::vector<int32_t>> random_docs(int n, int32_t max_id, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> len(0, 50);
  std::uniform_int_distribution<int32_t> id(0, max_id);
  std::vector<std::vector<int32_t>> docs(n);
  for (auto& d : docs) {
    d.resize(size_t(len(gen)));
    for (auto& t : d) t = id(gen);
  }
  return docs;
}

void round_trip(TokenDType dtype, int32_t max_id) {
  TempDir dir;
  const std::string prefix = dir.file("rt");
  const auto docs = random_docs(37, max_id, 42);
  {
    IndexedDatasetWriter w(prefix, dtype);
    for (const auto& d : docs) w.add_document(d);
    w.finalize();
  }
  IndexedDataset ds(prefix);
  EXPECT_EQ(ds.dtype(), dtype);
  ASSERT_EQ(ds.num_sequences(), 37);
  EXPECT_EQ(ds.num_documents(), 37);
  int64_t total = 0, ptr = 0;
  for (int i = 0; i < 37; ++i) {
    ASSERT_EQ(ds.sequence_length(i), int32_t(docs[size_t(i)].size()));
    EXPECT_EQ(ds.sequence_pointer(i), ptr);
    ptr += int64_t(docs[size_t(i)].size()) * dtype_size(dtype);
    EXPECT_EQ(ds.document_indices()[i], i);
    std::vector<int32_t> got(docs[size_t(i)].size());
    ds.read(i, 0, int64_t(got.size()), got.data());
    EXPECT_EQ(got, docs[size_t(i)]) << "sequence " << i;
    total += int64_t(got.size());
    if (got.size() >= 5) {  // a window from an offset
      int32_t part[3];
      ds.read(i, 2, 3, part);
      EXPECT_EQ(part[0], docs[size_t(i)][2]);
      EXPECT_EQ(part[2], docs[size_t(i)][4]);
    }
  }
  EXPECT_EQ(ds.document_indices()[37], 37);
  EXPECT_EQ(ds.num_tokens(), total);
  EXPECT_EQ(int64_t(std::filesystem::file_size(prefix + ".bin")), total * dtype_size(dtype));
  EXPECT_FALSE(std::filesystem::exists(prefix + ".bin.tmp"));
  EXPECT_FALSE(std::filesystem::exists(prefix + ".idx.tmp"));
}

TEST(IndexedDataset, RoundTripUInt16) { round_trip(TokenDType::kUInt16, 65535); }
TEST(IndexedDataset, RoundTripInt32) { round_trip(TokenDType::kInt32, 2000000000); }

TEST(IndexedDataset, OptimalDtypeFollowsMegatron) {
  EXPECT_EQ(optimal_token_dtype(65), TokenDType::kUInt16);
  EXPECT_EQ(optimal_token_dtype(65499), TokenDType::kUInt16);
  EXPECT_EQ(optimal_token_dtype(65500), TokenDType::kInt32);
  EXPECT_EQ(optimal_token_dtype(50257), TokenDType::kUInt16);
  EXPECT_EQ(optimal_token_dtype(128256), TokenDType::kInt32);
}

template <typename T>
T at(const std::string& s, size_t off) {
  T v;
  std::memcpy(&v, s.data() + off, sizeof(T));
  return v;
}

TEST(IndexedDataset, HeaderBytesMatchFormat) {
  TempDir dir;
  const std::string prefix = dir.file("hdr");
  {
    IndexedDatasetWriter w(prefix, TokenDType::kUInt16);
    const std::vector<int32_t> a{1, 2, 3}, c{513, 65535};
    w.add_document(a);
    w.add_document({});  // an empty sequence is still a sequence
    w.add_document(c);
    w.finalize();
  }
  const std::string idx = read_file(prefix + ".idx");
  ASSERT_EQ(idx.size(), size_t(34 + 3 * 4 + 3 * 8 + 4 * 8));
  const unsigned char magic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
  EXPECT_EQ(std::memcmp(idx.data(), magic, 9), 0);
  const unsigned char version[8] = {1, 0, 0, 0, 0, 0, 0, 0};  // little-endian uint64 1
  EXPECT_EQ(std::memcmp(idx.data() + 9, version, 8), 0);
  EXPECT_EQ(uint8_t(idx[17]), 8);  // uint16
  EXPECT_EQ(at<uint64_t>(idx, 18), 3u);
  EXPECT_EQ(at<uint64_t>(idx, 26), 4u);  // leading 0 + one per document
  EXPECT_EQ(at<int32_t>(idx, 34), 3);
  EXPECT_EQ(at<int32_t>(idx, 38), 0);
  EXPECT_EQ(at<int32_t>(idx, 42), 2);
  EXPECT_EQ(at<int64_t>(idx, 46), 0);
  EXPECT_EQ(at<int64_t>(idx, 54), 6);
  EXPECT_EQ(at<int64_t>(idx, 62), 6);
  for (int d = 0; d < 4; ++d) EXPECT_EQ(at<int64_t>(idx, 70 + 8 * size_t(d)), d);
  const std::string bin = read_file(prefix + ".bin");
  const unsigned char expect_bin[10] = {1, 0, 2, 0, 3, 0, 0x01, 0x02, 0xFF, 0xFF};
  ASSERT_EQ(bin.size(), 10u);
  EXPECT_EQ(std::memcmp(bin.data(), expect_bin, 10), 0);
}

TEST(IndexedDataset, StreamingWriterMultiSequenceAndEmptyDocuments) {
  TempDir dir;
  const std::string prefix = dir.file("stream");
  {
    IndexedDatasetWriter w(prefix, TokenDType::kInt32);
    const std::vector<int32_t> a{7, 8}, b{9};
    w.append(a);
    w.append(b);  // same sequence: 7 8 9
    w.end_sequence();
    w.append(a);  // second sequence of the same document
    w.end_document();
    w.end_document();  // a document with no sequence (Megatron's empty text)
    w.add_document(b);
    w.finalize();
  }
  IndexedDataset ds(prefix);
  ASSERT_EQ(ds.num_sequences(), 3);
  EXPECT_EQ(ds.num_documents(), 3);
  EXPECT_EQ(ds.sequence_length(0), 3);
  EXPECT_EQ(ds.sequence_length(1), 2);
  EXPECT_EQ(ds.sequence_length(2), 1);
  const int64_t expect_doc[4] = {0, 2, 2, 3};
  for (int d = 0; d < 4; ++d) EXPECT_EQ(ds.document_indices()[d], expect_doc[d]);
  int32_t t[3];
  ds.read(0, 0, 3, t);
  EXPECT_EQ(t[2], 9);
}

TEST(IndexedDataset, WriterRejectsIdsOutsideDtypeAndCleansUp) {
  TempDir dir;
  const std::string prefix = dir.file("bad");
  {
    IndexedDatasetWriter w(prefix, TokenDType::kUInt16);
    const std::vector<int32_t> big{70000}, neg{-1};
    EXPECT_NE(error_of([&] { w.add_document(big); }).find("70000"), std::string::npos);
    EXPECT_THROW(w.add_document(neg), Error);
    EXPECT_TRUE(std::filesystem::exists(prefix + ".bin.tmp"));
  }  // not finalized: no dataset, no temp files left behind
  EXPECT_FALSE(std::filesystem::exists(prefix + ".bin"));
  EXPECT_FALSE(std::filesystem::exists(prefix + ".idx"));
  EXPECT_FALSE(std::filesystem::exists(prefix + ".bin.tmp"));
}

// A small valid dataset whose files the corruption tests then damage.
class CorruptDataset : public ::testing::Test {
 protected:
  void SetUp() override {
    prefix_ = dir_.file("c");
    IndexedDatasetWriter w(prefix_, TokenDType::kUInt16);
    const std::vector<int32_t> a{1, 2, 3, 4}, b{5, 6}, c{7, 8, 9};
    w.add_document(a);
    w.add_document(b);
    w.add_document(c);
    w.finalize();
    idx_ = read_file(prefix_ + ".idx");
    bin_ = read_file(prefix_ + ".bin");
    ASSERT_NO_THROW(IndexedDataset{prefix_});
  }
  // Writes the damaged files and returns the error message of opening them.
  std::string open_error(const std::string& idx, const std::string& bin) {
    write_file(prefix_ + ".idx", idx);
    write_file(prefix_ + ".bin", bin);
    const std::string msg = error_of([&] { IndexedDataset ds(prefix_); });
    EXPECT_NE(msg.find("fix:"), std::string::npos) << msg;
    return msg;
  }
  template <typename T>
  std::string patched(size_t off, T v) {
    std::string s = idx_;
    std::memcpy(s.data() + off, &v, sizeof(T));
    return s;
  }
  TempDir dir_;
  std::string prefix_, idx_, bin_;
};

TEST_F(CorruptDataset, TruncatedIdx) {
  const std::string msg = open_error(idx_.substr(0, idx_.size() - 1), bin_);
  EXPECT_TRUE(has(msg, "c.idx") && has(msg, "truncated")) << msg;
  EXPECT_TRUE(has(open_error(idx_.substr(0, 20), bin_), "34-byte"));
}

TEST_F(CorruptDataset, TruncatedBin) {
  const std::string msg = open_error(idx_, bin_.substr(0, bin_.size() - 2));
  EXPECT_TRUE(has(msg, "c.bin") && has(msg, "16 bytes") && has(msg, "18 bytes")) << msg;
}

TEST_F(CorruptDataset, BadMagic) {
  std::string idx = idx_;
  idx[0] = 'X';
  EXPECT_TRUE(has(open_error(idx, bin_), "bad magic"));
}

TEST_F(CorruptDataset, WrongVersion) {
  EXPECT_TRUE(has(open_error(patched<uint64_t>(9, 2), bin_), "version 2"));
}

TEST_F(CorruptDataset, BadDtypeCode) {
  EXPECT_TRUE(has(open_error(patched<uint8_t>(17, 9), bin_), "dtype code 9"));
}

TEST_F(CorruptDataset, InconsistentPointers) {
  // Sequence 1 should start at byte 8 (4 uint16 tokens); claim 10.
  const std::string msg = open_error(patched<int64_t>(34 + 12 + 8, 10), bin_);
  EXPECT_TRUE(has(msg, "sequence 1 pointer is 10") && has(msg, "8")) << msg;
}

TEST_F(CorruptDataset, LengthsInconsistentWithBin) {
  // Longer first sequence: pointers no longer follow from the lengths.
  EXPECT_TRUE(has(open_error(patched<int32_t>(34, 5), bin_), "pointer"));
}

TEST_F(CorruptDataset, CountsLargerThanFile) {
  EXPECT_TRUE(has(open_error(patched<uint64_t>(18, uint64_t(1) << 60), bin_), "more than"));
  EXPECT_TRUE(has(open_error(patched<uint64_t>(26, 5), bin_), "implies"));
}

TEST_F(CorruptDataset, DocumentIndexNotEndingAtSequenceCount) {
  const size_t doc_off = 34 + 3 * 12;
  EXPECT_TRUE(has(open_error(patched<int64_t>(doc_off + 3 * 8, 2), bin_), "ends at 2"));
  EXPECT_TRUE(has(open_error(patched<int64_t>(doc_off + 1 * 8, 3), bin_), "smaller"));
  EXPECT_TRUE(has(open_error(patched<int64_t>(doc_off, 1), bin_), "starts at 1"));
}

TEST_F(CorruptDataset, MissingFile) {
  std::filesystem::remove(prefix_ + ".bin");
  const std::string msg = error_of([&] { IndexedDataset ds(prefix_); });
  EXPECT_TRUE(has(msg, "c.bin") && has(msg, "fix:")) << msg;
}

TEST_F(CorruptDataset, TokenIdsOutsideVocabRejected) {
  IndexedDataset ds(prefix_);
  EXPECT_NO_THROW(ds.validate_token_range(10));
  const std::string msg = error_of([&] { ds.validate_token_range(8); });
  EXPECT_TRUE(has(msg, "token id 8") && has(msg, "sequence 2") && has(msg, "size 8")) << msg;
  int32_t t[3];
  ds.read(2, 0, 3, t);
  const std::string span_msg = error_of([&] { check_token_span(t, 3, 9, "sequence 2"); });
  EXPECT_TRUE(has(span_msg, "token id 9") && has(span_msg, "size 9")) << span_msg;
  EXPECT_THROW(ds.read(2, 1, 3, t), Error);  // past the sequence end
  EXPECT_THROW(ds.read(3, 0, 1, t), Error);  // no such sequence
}

TEST_F(CorruptDataset, HugeReadRequestRefusedWithoutOverflow) {
  IndexedDataset ds(prefix_);
  int32_t t[1];
  // offset + n overflows int64: must be refused, not wrapped into range.
  EXPECT_THROW(ds.read(0, 2, std::numeric_limits<int64_t>::max(), t), Error);
  EXPECT_THROW(ds.read(0, std::numeric_limits<int64_t>::max(), 1, t), Error);
}

// Found by tests/fuzz/fuzz_indexed_dataset: a stored value that is no int32
// token id at all made read() throw inside validate_token_range's OpenMP
// region, which is std::terminate (a crash, no message). It must be an
// mt::Error naming the .bin.
TEST(IndexedDataset, ValuesThatAreNoTokenIdsGiveAnErrorInTheTokenCheck) {
  TempDir dir;
  const std::string prefix = dir.file("wide");
  {
    IndexedDatasetWriter w(prefix, TokenDType::kInt64);
    const std::vector<int32_t> a{1, 2, 3}, b{4, 5};
    w.add_document(a);
    w.add_document(b);
    w.finalize();
  }
  std::string bin = read_file(prefix + ".bin");
  const int64_t big = int64_t(1) << 40;  // token 1 of sequence 1
  std::memcpy(bin.data() + 4 * 8, &big, 8);
  write_file(prefix + ".bin", bin);
  IndexedDataset ds(prefix);
  const std::string msg = error_of([&] { ds.validate_token_range(100); });
  EXPECT_TRUE(has(msg, "wide.bin") && has(msg, "1099511627776") && has(msg, "int32")) << msg;

  const std::string fprefix = dir.file("float");
  {
    IndexedDatasetWriter w(fprefix, TokenDType::kFloat32);
    const std::vector<int32_t> a{1, 2, 3};
    w.add_document(a);
    w.finalize();
  }
  std::string fbin = read_file(fprefix + ".bin");
  const float half = 2.5f;
  std::memcpy(fbin.data() + 4, &half, 4);
  write_file(fprefix + ".bin", fbin);
  IndexedDataset fds(fprefix);
  const std::string fmsg = error_of([&] { fds.validate_token_range(100); });
  EXPECT_TRUE(has(fmsg, "float.bin") && has(fmsg, "2.5")) << fmsg;
}

// A FIFO used to block open() forever (no writer ever comes); anything but a
// regular file must be refused by name before it is opened.
TEST_F(CorruptDataset, FifoOrDirectoryInsteadOfFileRefused) {
  for (const char* ext : {".idx", ".bin"}) {
    const std::string path = prefix_ + ext;
    std::filesystem::remove(path);
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
    const std::string msg = error_of([&] { IndexedDataset ds(prefix_); });
    EXPECT_TRUE(has(msg, std::string("c") + ext) && has(msg, "FIFO") && has(msg, "fix:")) << msg;
    std::filesystem::remove(path);
    std::filesystem::create_directory(path);
    const std::string dmsg = error_of([&] { IndexedDataset ds(prefix_); });
    EXPECT_TRUE(has(dmsg, std::string("c") + ext) && has(dmsg, "directory")) << dmsg;
    std::filesystem::remove(path);
    write_file(path, ext == std::string(".idx") ? idx_ : bin_);
  }
  EXPECT_NO_THROW(IndexedDataset{prefix_});
}

// ---- A dataset written by Megatron-LM itself (../shared/data/megatron-indexed).

// Python's text.split("\n\n") without the empty pieces.
std::vector<std::string> paragraphs(const std::string& text) {
  std::vector<std::string> out;
  size_t beg = 0;
  for (;;) {
    const size_t p = text.find("\n\n", beg);
    const std::string piece = text.substr(beg, p == std::string::npos ? std::string::npos : p - beg);
    if (!piece.empty()) out.push_back(piece);
    if (p == std::string::npos) break;
    beg = p + 2;
  }
  return out;
}

TEST(MegatronFixture, TinyShakespeareReadsAndDecodes) {
  const std::string rel = "megatron-indexed/tinyshakespeare_text_document";
  if (!test::shared_file_exists(rel + ".idx") || !test::shared_file_exists("tinyshakespeare.txt"))
    GTEST_SKIP() << "shared data not found at " << MT_SHARED_DATA
                 << " (needs megatron-indexed/ and tinyshakespeare.txt); skipping";
  IndexedDataset ds(test::shared_data(rel));
  EXPECT_EQ(ds.dtype(), TokenDType::kUInt16);
  ASSERT_EQ(ds.num_sequences(), 7222);
  EXPECT_EQ(ds.num_documents(), 7222);
  int32_t first[8];
  ds.read(0, 0, 8, first);
  const int32_t expect[8] = {18, 47, 56, 57, 58, 1, 15, 47};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(first[i], expect[i]);
  const CharTokenizer tok = CharTokenizer::load(test::shared_data("megatron-indexed/vocab.json"));
  ASSERT_EQ(tok.vocab_size(), 65);
  ds.validate_token_range(tok.vocab_size());
  const std::vector<std::string> paras = paragraphs(read_file(test::shared_data("tinyshakespeare.txt")));
  ASSERT_EQ(paras.size(), 7222u);
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < ds.num_sequences(); ++i) {
    ids.resize(size_t(ds.sequence_length(i)));
    ds.read(i, 0, int64_t(ids.size()), ids.data());
    ASSERT_EQ(tok.detokenize(ids), paras[size_t(i)]) << "sequence " << i;
  }
}

}  // namespace indexed_dataset_test
}  // namespace mt
