#include "checkpoint/safetensors.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/atomic_file.h"
#include "checkpoint/crc32c.h"

namespace mt {
namespace safetensors_test {

namespace fs = std::filesystem;

// A fresh directory per test, removed at the end.
class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "mt_st_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = char((n >> (8 * i)) & 0xff);
  return s;
}

// A file built byte by byte: length prefix, header as given (no padding), data.
std::string hand_file(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

void write_bytes(const std::string& p, const std::string& bytes) {
  FILE* f = std::fopen(p.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
}

// Opening `bytes` must fail with a message containing each of `needles`.
void expect_open_error(const std::string& p, const std::string& bytes,
                       std::vector<std::string> needles) {
  write_bytes(p, bytes);
  try {
    SafetensorsReader r(p);
    ADD_FAILURE() << "opening a bad file succeeded; expected: " << needles[0];
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(p), std::string::npos) << msg;  // names the file
    for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg;
  }
}

std::string f32_bytes(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

TEST_F(SafetensorsTest, RoundTripKeepsDataShapesAndMetadata) {
  std::vector<float> w(6), b(3);
  for (int i = 0; i < 6; ++i) w[i] = 0.5f * float(i) - 1.0f;
  for (int i = 0; i < 3; ++i) b[i] = 100.0f + float(i);
  std::vector<uint16_t> h = {0x3f80, 0xc000, 0x0000};  // bf16 1, -2, 0
  std::vector<int64_t> ids = {-5, 7, int64_t(1) << 40};
  const float scalar = 3.25f;

  SafetensorsWriter wr;
  wr.add("decoder.weight", Tensor(w.data(), DType::kF32, {2, 3}));
  wr.add("decoder.bias", StDType::kF32, {3}, b.data());
  wr.add("half", StDType::kBF16, {3}, h.data());
  wr.add("ids", StDType::kI64, {3}, ids.data());
  wr.add("scalar", StDType::kF32, {}, &scalar);
  wr.add("empty", StDType::kF32, {0, 4}, nullptr);
  wr.set_metadata("iteration", "42");
  wr.set_metadata("tp", "2");
  const std::string p = path("model.safetensors");
  const size_t bytes = wr.write(p);
  EXPECT_EQ(bytes, fs::file_size(p));

  SafetensorsReader r(p);
  EXPECT_EQ(r.names(), (std::vector<std::string>{"decoder.bias", "decoder.weight", "empty", "half",
                                                 "ids", "scalar"}));
  EXPECT_TRUE(r.has("half"));
  EXPECT_FALSE(r.has("missing"));
  EXPECT_EQ(r.info("decoder.weight").dtype, StDType::kF32);
  EXPECT_EQ(r.info("decoder.weight").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(r.info("scalar").shape, std::vector<int64_t>{});
  EXPECT_EQ(r.info("scalar").numel(), 1);
  EXPECT_EQ(r.info("empty").numel(), 0);
  EXPECT_EQ(r.metadata().at("iteration"), "42");
  EXPECT_EQ(r.metadata_or("tp", "1"), "2");
  EXPECT_EQ(r.metadata_or("pp", "1"), "1");

  std::vector<float> got(6);
  r.read_f32("decoder.weight", got.data(), std::vector<int64_t>{2, 3});
  EXPECT_EQ(got, w);
  r.read_f32("decoder.bias", got.data(), 3);
  EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + 3), b);
  r.read_f32("half", got.data(), 3);  // bf16 widened
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[1], -2.0f);
  EXPECT_EQ(got[2], 0.0f);
  r.read_f32("scalar", got.data(), 1);
  EXPECT_EQ(got[0], 3.25f);
  EXPECT_EQ(std::memcmp(r.raw("ids"), ids.data(), 24), 0);
  // Largest element size first: the I64 tensor starts the data section, and
  // every tensor is aligned to its element size.
  EXPECT_EQ(r.info("ids").begin, 0u);
  for (const std::string& n : r.names())
    EXPECT_EQ(r.info(n).begin % st_dtype_size(r.info(n).dtype), 0u) << n;
}

TEST_F(SafetensorsTest, HeaderBytesFollowTheSpec) {
  // The bytes the reference Python library produces for
  // save({"test": torch.zeros((2, 2), dtype=torch.int32)},
  //      metadata={"crc32c": '{"test":"42709aea"}'}): the length, the JSON
  // (metadata first), padding to 8 bytes, sixteen zero bytes. The writer
  // always records each tensor's CRC-32C (here of 16 zero bytes) and the
  // file's CRC-32C is that of all its bytes.
  std::vector<int32_t> zeros(4, 0);
  SafetensorsWriter wr;
  wr.add("test", StDType::kI32, {2, 2}, zeros.data());
  const std::string p = path("ref.safetensors");
  uint32_t file_crc = 0;
  wr.write(p, &file_crc);
  ASSERT_EQ(crc32c_hex(crc32c(zeros.data(), 16)), "42709aea");
  const std::string json =
      R"({"__metadata__":{"crc32c":"{\"test\":\"42709aea\"}"},)"
      R"("test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})";
  const std::string pad((8 - json.size() % 8) % 8, ' ');
  const std::string want = le64(json.size() + pad.size()) + json + pad + std::string(16, '\0');
  EXPECT_EQ(read_text_file(p), want);
  EXPECT_EQ(file_crc, crc32c(want.data(), want.size()));

  // With metadata and odd sizes: the data start is still 8-byte aligned and
  // the header is valid JSON padded with spaces only.
  std::vector<uint16_t> h(3, 0x3f80);
  SafetensorsWriter w2;
  w2.add("a_weird_name.x", StDType::kBF16, {3}, h.data());
  w2.set_metadata("format", "pt");
  const std::string p2 = path("meta.safetensors");
  w2.write(p2);
  const std::string bytes = read_text_file(p2);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 6);
  const std::string header = bytes.substr(8, n);
  const std::string crc = crc32c_hex(crc32c(h.data(), 6));
  EXPECT_EQ(header.rfind(R"({"__metadata__":{"format":"pt","crc32c":"{\"a_weird_name.x\":\")" +
                             crc + R"(\"}"},"a_weird_name.x":)",
                         0),
            0u)
      << header;
  const size_t close = header.find_last_of('}');
  EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos);
}

TEST_F(SafetensorsTest, ReadsHandWrittenFile) {
  // As another tool would write it: unpadded header, keys in any order,
  // metadata last, F16 / BF16 / F64 data.
  const std::string header = R"({"w":{"shape":[2],"dtype":"F32","data_offsets":[0,8]},)"
                             R"("h":{"dtype":"F16","shape":[4],"data_offsets":[8,16]},)"
                             R"("d":{"dtype":"F64","shape":[1],"data_offsets":[16,24]},)"
                             R"("b":{"dtype":"BF16","shape":[1,1],"data_offsets":[24,26]},)"
                             R"("__metadata__":{"format":"pt"}})";
  const double dv = -0.125;
  std::string data = f32_bytes({1.5f, -7.0f});
  // F16: 1.0, 0.5, smallest subnormal 2^-24, -inf
  for (uint16_t v : {0x3c00, 0x3800, 0x0001, 0xfc00})
    data += std::string{char(v & 0xff), char(v >> 8)};
  data += std::string(reinterpret_cast<const char*>(&dv), 8);
  data += std::string{char(0x80), char(0xbf)};  // bf16 -1.0
  const std::string p = path("hand.safetensors");
  write_bytes(p, hand_file(header, data));

  SafetensorsReader r(p);
  EXPECT_EQ(r.names().size(), 4u);
  EXPECT_EQ(r.metadata().at("format"), "pt");
  EXPECT_EQ(r.info("h").dtype, StDType::kF16);
  std::vector<float> got(4);
  r.read_f32("w", got.data(), 2);
  EXPECT_EQ(got[0], 1.5f);
  EXPECT_EQ(got[1], -7.0f);
  r.read_f32("h", got.data(), 4);
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[1], 0.5f);
  EXPECT_EQ(got[2], std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(got[3]) && got[3] < 0);
  r.read_f32("d", got.data(), 1);
  EXPECT_EQ(got[0], -0.125f);
  r.read_f32("b", got.data(), std::vector<int64_t>{1, 1});
  EXPECT_EQ(got[0], -1.0f);
}

TEST_F(SafetensorsTest, WrongShapeOrDtypeOnReadNamesExpectedAndActual) {
  std::vector<float> w(6, 1.0f);
  std::vector<int32_t> ids(2, 3);
  SafetensorsWriter wr;
  wr.add("w", StDType::kF32, {2, 3}, w.data());
  wr.add("ids", StDType::kI32, {2}, ids.data());
  const std::string p = path("m.safetensors");
  wr.write(p);
  SafetensorsReader r(p);
  std::vector<float> dst(8);
  try {
    r.read_f32("w", dst.data(), 8);
    ADD_FAILURE() << "numel mismatch accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("(2, 3)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("but 8 were expected"), std::string::npos) << msg;
  }
  try {
    r.read_f32("w", dst.data(), std::vector<int64_t>{3, 2});
    ADD_FAILURE() << "shape mismatch accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("has shape (2, 3) but (3, 2) was expected"), std::string::npos) << msg;
  }
  EXPECT_THROW(r.read_f32("ids", dst.data(), 2), Error);
  try {
    r.info("nope");
    ADD_FAILURE();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("no tensor 'nope'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(p), std::string::npos) << msg;
  }
}

TEST_F(SafetensorsTest, CorruptFilesAreRefusedWithAReason) {
  const std::string good = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string p = path("bad.safetensors");
  // Shorter than the length prefix.
  expect_open_error(p, "abc", {"truncated"});
  // Header length beyond the file.
  expect_open_error(p, le64(1000) + good + f32_bytes({1, 2}), {"header length 1000 exceeds"});
  // Data cut short.
  expect_open_error(p, hand_file(good, f32_bytes({1})), {"truncated", "'a'"});
  // Not JSON.
  expect_open_error(p, hand_file("{\"a\": [1, 2", f32_bytes({1, 2})), {"corrupt header", "JSON"});
  expect_open_error(p, hand_file("[1,2,3]", ""), {"corrupt header"});
  // Unknown dtype, bad shape, bad offsets.
  expect_open_error(
      p, hand_file(R"({"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", f32_bytes({1, 2})),
      {"unknown dtype", "F33"});
  expect_open_error(
      p, hand_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", f32_bytes({1, 2})),
      {"shape"});
  expect_open_error(p, hand_file(R"({"a":{"dtype":"F32","shape":[2]}})", f32_bytes({1, 2})),
                    {"data_offsets"});
  // Wrong numel for the byte range.
  expect_open_error(
      p, hand_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", f32_bytes({1, 2})),
      {"size mismatch", "needs 12 bytes", "numel 3"});
  // Overlapping tensors.
  expect_open_error(p,
                    hand_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                              f32_bytes({1, 2, 3})),
                    {"overlaps", "'b'", "'a'"});
  // A gap, and trailing bytes nobody owns.
  expect_open_error(
      p, hand_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", f32_bytes({1, 2})),
      {"gap of 4 bytes"});
  expect_open_error(p, hand_file(good, f32_bytes({1, 2, 3})), {"trailing"});
  // Metadata values must be strings.
  expect_open_error(p, hand_file(R"({"__metadata__":{"step":3}})", ""), {"metadata 'step'"});
}

// numel x dtype size wrapped around 2^64: shape [2^61] of F64 "needed" 0
// bytes, so the file was accepted with a tensor of 2^61 elements and no data
// (a load would then allocate or read 2^61 floats).
TEST_F(SafetensorsTest, ShapeWhoseByteSizeOverflowsIsRefused) {
  const std::string p = path("wrap.safetensors");
  expect_open_error(
      p, hand_file(R"({"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}})", ""),
      {"'a'", "2305843009213693952", "2^64"});
  expect_open_error(
      p, hand_file(R"({"a":{"dtype":"I32","shape":[4611686018427387904,1],"data_offsets":[0,0]}})",
                   ""),
      {"'a'", "2^64"});
}

// The error message used to dump() the offending JSON value, which recurses
// once per nesting level: a shape nested a million deep (2 MB of header)
// overflowed the stack. The message now shows a short, flat description.
TEST_F(SafetensorsTest, DeeplyNestedHeaderValueGivesAnErrorNotAStackOverflow) {
  const std::string p = path("deep.safetensors");
  const size_t depth = 1000000;
  const std::string nest = std::string(depth, '[') + std::string(depth, ']');
  expect_open_error(p,
                    hand_file(R"({"a":{"dtype":"F32","shape":)" + nest + R"(,"data_offsets":[0,0]}})",
                              ""),
                    {"'a'", "shape [[...]]"});
  expect_open_error(p, hand_file(R"({"a":{"dtype":)" + nest + R"(,"shape":[],"data_offsets":[0,4]}})",
                                 f32_bytes({1})),
                    {"unknown dtype [[...]]"});
  expect_open_error(p, hand_file(R"({"a":{"dtype":"F32","shape":[],"data_offsets":)" + nest + "}}",
                                 f32_bytes({1})),
                    {"data_offsets [[...]]"});
  // Long flat values are cut short in the message.
  expect_open_error(
      p, hand_file(R"({"a":{"dtype":")" + std::string(5000, 'x') + R"(","shape":[],"data_offsets":[0,4]}})",
                   f32_bytes({1})),
      {"unknown dtype \"xxx", "..."});
}

// open() of a FIFO blocked forever waiting for a writer; anything but a
// regular file is refused by name before it is opened.
TEST_F(SafetensorsTest, FifoOrDirectoryIsRefusedBeforeOpening) {
  const std::string fifo = path("fifo.safetensors");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  try {
    SafetensorsReader r(fifo);
    ADD_FAILURE() << "opened a FIFO";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(fifo), std::string::npos) << msg;
    EXPECT_NE(msg.find("FIFO"), std::string::npos) << msg;
  }
  try {
    SafetensorsReader r(dir_.string());
    ADD_FAILURE() << "opened a directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("directory"), std::string::npos) << e.what();
  }
}

TEST_F(SafetensorsTest, WriterRefusesBadInput) {
  float x = 1;
  SafetensorsWriter wr;
  wr.add("x", StDType::kF32, {1}, &x);
  EXPECT_THROW(wr.add("x", StDType::kF32, {1}, &x), Error);
  EXPECT_THROW(wr.add("__metadata__", StDType::kF32, {1}, &x), Error);
  EXPECT_THROW(wr.add("y", StDType::kF32, {-1}, &x), Error);
  EXPECT_THROW(wr.add("z", StDType::kF32, {4}, nullptr), Error);
}

TEST_F(SafetensorsTest, WriteIntoMissingDirectoryNamesThePath) {
  float x = 1;
  SafetensorsWriter wr;
  wr.add("x", StDType::kF32, {1}, &x);
  const std::string p = path("no/such/dir/m.safetensors");
  try {
    wr.write(p);
    ADD_FAILURE() << "write into a missing directory succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

// Simulates a full disk with RLIMIT_FSIZE (writes past it fail with EFBIG):
// the error names the path, the old file is untouched and no .tmp is left.
TEST_F(SafetensorsTest, FailedWriteLeavesOldFileAndNoTemporary) {
  const std::string p = path("m.safetensors");
  atomic_write_text(p, "old contents");
  std::vector<float> big(1 << 16, 2.0f);  // 256 KiB
  SafetensorsWriter wr;
  wr.add("big", StDType::kF32, {int64_t(big.size())}, big.data());

  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string msg;
  try {
    wr.write(p);
  } catch (const Error& e) {
    msg = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);

  EXPECT_NE(msg.find(p), std::string::npos) << "expected an error naming the path, got: " << msg;
  EXPECT_EQ(read_text_file(p), "old contents");
  EXPECT_FALSE(fs::exists(p + ".tmp"));
}

TEST_F(SafetensorsTest, AtomicWriteReplacesAndLeavesNoTemporary) {
  const std::string p = path("latest_checkpointed_iteration.txt");
  atomic_write_text(p, "100");
  EXPECT_EQ(read_text_file(p), "100");
  atomic_write_text(p, "200\n");
  EXPECT_EQ(read_text_file(p), "200\n");
  std::vector<float> w(10, 1.0f);
  SafetensorsWriter wr;
  wr.add("w", StDType::kF32, {10}, w.data());
  wr.write(path("m.safetensors"));
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    ++entries;
    EXPECT_NE(e.path().extension(), ".tmp") << e.path();
  }
  EXPECT_EQ(entries, 2);
  // A writer dropped before commit leaves nothing and keeps the old file.
  {
    AtomicFileWriter aw(p);
    aw.write("partial", 7);
    EXPECT_TRUE(fs::exists(p + ".tmp"));
  }
  EXPECT_FALSE(fs::exists(p + ".tmp"));
  EXPECT_EQ(read_text_file(p), "200\n");
  EXPECT_THROW(read_text_file(path("absent.txt")), Error);
  fsync_dir(dir_.string());
  EXPECT_THROW(fsync_dir(path("absent_dir")), Error);
  EXPECT_EQ(parent_dir("a/b/c.txt"), "a/b");
  EXPECT_EQ(parent_dir("c.txt"), ".");
  EXPECT_EQ(parent_dir("/c.txt"), "/");
}

}  // namespace safetensors_test
}  // namespace mt
