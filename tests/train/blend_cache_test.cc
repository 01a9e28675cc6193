// The --data-cache-path file's reader says what is wrong with a file it will
// not trust (issue 37): a changed byte is "corrupt" (the CRC-32C, or the
// sample count that no longer fits the file), a file cut short is
// "truncated", another blend's index is neither; an intact file reads back.
#include "train/blend_cache.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "temp_dir.h"

namespace mt {
namespace blend_cache_test {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

class BlendCacheFile : public ::testing::Test {
 protected:
  void SetUp() override {
    index.dataset = {0, 1, 1, 0, 1};
    index.sample = {0, 0, 1, 1, 2};
    write_blend_cache(file, kDescription, index);
    bytes = read_all(file);
    // magic, length, description, count, 5 x (2 + 8), CRC.
    ASSERT_EQ(bytes.size(), 8 + 8 + kDescription.size() + 8 + 5 * 10 + 4);
  }
  // The reader's verdict on `damaged` written over the file ("" when it reads).
  std::string problem_of(const std::string& damaged) {
    write_all(file, damaged);
    BlendIndex got;
    std::string problem;
    if (read_blend_cache(file, kDescription, &got, &problem)) {
      EXPECT_EQ(got.dataset, index.dataset);
      EXPECT_EQ(got.sample, index.sample);
      return "";
    }
    return problem;
  }
  const std::string kDescription = "blend of a and b, 5 samples";
  test::TempDir dir;
  const std::string file = dir.file("blend_index.bin");
  BlendIndex index;
  std::string bytes;
};

TEST_F(BlendCacheFile, IntactFileReadsBack) { EXPECT_EQ(problem_of(bytes), ""); }

TEST_F(BlendCacheFile, AFlippedByteInTheSamplesIsCorruptNotTruncated) {
  std::string b = bytes;
  b[b.size() - 12] ^= 0x7f;  // inside the dataset sample index
  const std::string p = problem_of(b);
  EXPECT_EQ(p.rfind("corrupt (CRC-32C ", 0), 0u) << p;
  EXPECT_EQ(p.find("truncated"), std::string::npos) << p;
}

TEST_F(BlendCacheFile, AFlippedByteInTheSampleCountIsCorruptNotTruncated) {
  std::string b = bytes;
  b[8 + 8 + kDescription.size() + 1] ^= 0x01;  // the count's second byte: 5 -> 261
  const std::string p = problem_of(b);
  EXPECT_EQ(p, "corrupt (its sample count reads 261 but the file holds 5 samples: a changed "
               "byte in the header)");
}

TEST_F(BlendCacheFile, AFileCutShortIsTruncated) {
  const std::string p = problem_of(bytes.substr(0, bytes.size() - 7));
  EXPECT_EQ(p.rfind("truncated (", 0), 0u) << p;
  EXPECT_NE(p.find("needs " + std::to_string(bytes.size()) + " bytes"), std::string::npos) << p;
  const std::string header = problem_of(bytes.substr(0, 10));
  EXPECT_EQ(header.rfind("truncated (10 bytes", 0), 0u) << header;
}

TEST_F(BlendCacheFile, TrailingBytesAndAnotherBlendAreSaidAsSuch) {
  const std::string p = problem_of(bytes + "xx");
  EXPECT_EQ(p.rfind("corrupt (", 0), 0u) << p;
  EXPECT_NE(p.find("trailing bytes"), std::string::npos) << p;
  write_blend_cache(file, "another blend, 5 samples", index);
  BlendIndex got;
  std::string problem;
  EXPECT_FALSE(read_blend_cache(file, kDescription, &got, &problem));
  EXPECT_EQ(problem, "the index of another blend (its description differs)");
}

}  // namespace blend_cache_test
}  // namespace mt
