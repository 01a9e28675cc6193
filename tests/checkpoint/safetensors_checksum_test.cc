// The checksums of safetensors files (safetensors.h): a flipped byte in a
// tensor is named by file and tensor when it is read; the whole-file record
// catches a damaged header, a replaced file and a wrong length.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/atomic_file.h"
#include "checkpoint/crc32c.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "error_of.h"

namespace mt {
namespace safetensors_checksum_test {

namespace fs = std::filesystem;

class SafetensorsChecksumTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "mt_stcrc_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    a_.assign(1000, 0.f);
    b_.assign(300, 0.f);
    for (size_t i = 0; i < a_.size(); ++i) a_[i] = float(i) * 0.5f;
    for (size_t i = 0; i < b_.size(); ++i) b_[i] = -float(i);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }

  // Writes a two-tensor file; returns its recorded size and CRC.
  std::pair<uint64_t, uint32_t> write(const std::string& p) {
    SafetensorsWriter w;
    w.add("a", StDType::kF32, {10, 100}, a_.data());
    w.add("b", StDType::kF32, {300}, b_.data());
    w.set_metadata("format", "pt");
    uint32_t crc = 0;
    const size_t bytes = w.write(p, &crc);
    return {bytes, crc};
  }
  static void flip(const std::string& p, uint64_t offset) {
    std::string bytes = read_text_file(p);
    ASSERT_LT(offset, bytes.size());
    bytes[offset] = char(bytes[offset] ^ 0x01);
    FILE* f = std::fopen(p.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    std::fclose(f);
  }
  static uint64_t data_start(const std::string& p) {
    const std::string bytes = read_text_file(p);
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    return 8 + n;
  }

  fs::path dir_;
  std::vector<float> a_, b_;
};

using test::error_of;

TEST_F(SafetensorsChecksumTest, IntactFilePassesEveryCheck) {
  const std::string p = path("ok.safetensors");
  const auto [bytes, crc] = write(p);
  const std::string all = read_text_file(p);
  EXPECT_EQ(crc, crc32c(all.data(), all.size()));  // the file's CRC is of all its bytes
  SafetensorsReader r(p);
  EXPECT_TRUE(r.has_checksums());
  EXPECT_EQ(r.info("a").crc32c, crc32c(a_.data(), a_.size() * 4));
  r.check_file(bytes, crc);
  std::vector<float> got(300);
  r.read_f32("b", got.data(), 300);
  EXPECT_EQ(got, b_);
}

TEST_F(SafetensorsChecksumTest, FlippedDataByteNamesFileAndTensor) {
  const std::string p = path("flip.safetensors");
  const auto [bytes, crc] = write(p);
  SafetensorsReader r0(p);
  const uint64_t b_begin = data_start(p) + r0.info("b").begin;
  r0.close();
  flip(p, b_begin + 123);
  SafetensorsReader r(p);
  r.check_file(bytes, crc);  // the header is intact: the damage is found when "b" is read
  std::vector<float> got(1000);
  r.read_f32("a", got.data(), 1000);  // the other tensor still reads
  EXPECT_EQ(got, a_);
  const std::string msg = error_of([&] { r.read_f32("b", got.data(), 300); });
  EXPECT_NE(msg.find(p), std::string::npos) << msg;
  EXPECT_NE(msg.find("tensor 'b' is corrupt"), std::string::npos) << msg;
  EXPECT_NE(msg.find(crc32c_hex(crc32c(b_.data(), b_.size() * 4))), std::string::npos) << msg;
  EXPECT_NE(msg.find("fix:"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { r.raw("b"); }), "");
  // Without verification the damaged bytes load as they are.
  SafetensorsReader skip(p);
  skip.set_verify(false);
  skip.read_f32("b", got.data(), 300);
  EXPECT_NE(std::vector<float>(got.begin(), got.begin() + 300), b_);
}

TEST_F(SafetensorsChecksumTest, DamagedHeaderFailsTheFileCheck) {
  const std::string p = path("header.safetensors");
  const auto [bytes, crc] = write(p);
  const std::string all = read_text_file(p);
  const size_t at = all.find("\"pt\"");
  ASSERT_NE(at, std::string::npos);
  flip(p, at + 1);  // "pt" -> "qt": still valid JSON, the same layout
  SafetensorsReader r(p);
  const std::string msg = error_of([&] { r.check_file(bytes, crc); });
  EXPECT_NE(msg.find(p), std::string::npos) << msg;
  EXPECT_NE(msg.find("header does not match"), std::string::npos) << msg;
  EXPECT_NE(msg.find(crc32c_hex(crc)), std::string::npos) << msg;
  // A flip that breaks the header's JSON fails at open.
  write(p);
  flip(p, 8);  // '{' -> 'z'
  EXPECT_NE(error_of([&] { SafetensorsReader bad(p); }).find("corrupt header"), std::string::npos);
}

TEST_F(SafetensorsChecksumTest, TruncatedOrReplacedFileIsRefused) {
  const std::string p = path("t.safetensors");
  const auto [bytes, crc] = write(p);
  fs::resize_file(p, bytes - 10);
  EXPECT_NE(error_of([&] { SafetensorsReader r(p); }).find("truncated"), std::string::npos);
  // Another valid file in its place: its length or its CRC differs.
  b_[0] = 42.f;
  write(p);
  SafetensorsReader r(p);
  EXPECT_NE(error_of([&] { r.check_file(bytes, crc); }).find("header does not match"),
            std::string::npos);
  const std::string msg = error_of([&] { r.check_file(bytes + 8, crc); });
  EXPECT_NE(msg.find("bytes but " + std::to_string(bytes + 8) + " were written"),
            std::string::npos) << msg;
}

TEST_F(SafetensorsChecksumTest, FilesWithoutChecksumsReadUnchecked) {
  // As another tool writes it: no "crc32c" metadata.
  const std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string bytes(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  const float w[2] = {1.5f, -2.f};
  bytes += header + std::string(reinterpret_cast<const char*>(w), 8);
  const std::string p = path("foreign.safetensors");
  FILE* f = std::fopen(p.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  SafetensorsReader r(p);
  EXPECT_FALSE(r.has_checksums());
  float got[2];
  r.read_f32("w", got, 2);
  EXPECT_EQ(got[1], -2.f);
  EXPECT_NE(error_of([&] { r.check_file(bytes.size(), 0); }).find("no tensor checksums"),
            std::string::npos);
}

TEST_F(SafetensorsChecksumTest, MalformedChecksumMetadataIsRefused) {
  auto file_with = [&](const std::string& crc_value) {
    const std::string header = R"({"__metadata__":{"crc32c":)" + crc_value +
                               R"(},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
    std::string bytes(8, '\0');
    const uint64_t n = header.size();
    std::memcpy(bytes.data(), &n, 8);
    bytes += header + std::string(4, '\0');
    const std::string p = path("m.safetensors");
    FILE* f = std::fopen(p.c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
    return error_of([&] { SafetensorsReader r(p); });
  };
  EXPECT_NE(file_with(R"("{\"w\":\"xyz\"}")").find("not 8 hex digits"), std::string::npos);
  EXPECT_NE(file_with(R"("{\"v\":\"00000000\"}")").find("names tensor 'v'"), std::string::npos);
  EXPECT_NE(file_with(R"("{}")").find("tensor 'w' has no crc32c"), std::string::npos);
  EXPECT_NE(file_with(R"("[1")").find("is not JSON"), std::string::npos);
  EXPECT_EQ(file_with(R"("{\"w\":\"2144df1c\"}")"), "");  // crc32c of four zero bytes
}

}  // namespace safetensors_checksum_test
}  // namespace mt
