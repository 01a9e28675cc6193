#include "checkpoint/crc32c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace mt {
namespace crc32c_test {

std::vector<unsigned char> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<unsigned char> v(n);
  for (unsigned char& b : v) b = static_cast<unsigned char>(g());
  return v;
}

// Published check values: the CRC catalogue's check string and RFC 3720's
// (iSCSI) 32-byte test vectors, for both implementations.
TEST(Crc32c, PublishedCheckValues) {
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xff), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[size_t(i)] = static_cast<unsigned char>(i);
    down[size_t(i)] = static_cast<unsigned char>(31 - i);
  }
  const std::string check = "123456789";
  for (bool hw : {false, true}) {
    if (hw && !crc32c_hardware_available()) continue;
    auto f = [&](const void* d, size_t n) {
      return hw ? crc32c_extend_hardware(0, d, n) : crc32c_extend_portable(0, d, n);
    };
    SCOPED_TRACE(hw ? "hardware" : "portable");
    EXPECT_EQ(f(check.data(), check.size()), 0xE3069283u);
    EXPECT_EQ(f(zeros.data(), 32), 0x8A9136AAu);
    EXPECT_EQ(f(ones.data(), 32), 0x62A8AB43u);
    EXPECT_EQ(f(up.data(), 32), 0x46DD794Eu);
    EXPECT_EQ(f(down.data(), 32), 0x113FDB5Cu);
    EXPECT_EQ(f(check.data(), 0), 0u);
  }
  EXPECT_EQ(crc32c(check.data(), check.size()), 0xE3069283u);
}

// The hardware path (three streams of 4 KB, an unaligned head, 8-byte body,
// byte tail) equals the table at lengths and offsets around every boundary.
TEST(Crc32c, HardwareEqualsPortable) {
  // Every x86-64 CPU since 2008 has SSE4.2; without it the fast path is lost.
  ASSERT_TRUE(crc32c_hardware_available())
      << "no SSE4.2 on this CPU: checksums fall back to the 7x slower table";
  const std::vector<unsigned char> buf = random_bytes(5 * 3 * 4096 + 64, 7);
  for (size_t off : {0, 1, 3, 7, 8}) {
    for (size_t n : {0, 1, 7, 8, 9, 63, 4095, 4096, 12287, 12288, 12289, 12295, 24576,
                     24583, 3 * 4096 * 5}) {
      ASSERT_EQ(crc32c_extend_hardware(0, buf.data() + off, n),
                crc32c_extend_portable(0, buf.data() + off, n))
          << "offset " << off << " length " << n;
      ASSERT_EQ(crc32c_extend_hardware(0x12345678u, buf.data() + off, n),
                crc32c_extend_portable(0x12345678u, buf.data() + off, n));
    }
  }
}

// Extending piece by piece and combining separately computed CRCs both give
// the CRC of the whole.
TEST(Crc32c, ExtendAndCombineEqualTheWhole) {
  const std::vector<unsigned char> buf = random_bytes(100000, 11);
  const uint32_t whole = crc32c(buf.data(), buf.size());
  for (size_t cut : {size_t(0), size_t(1), size_t(8), size_t(4097), size_t(50000), buf.size()}) {
    const uint32_t a = crc32c(buf.data(), cut), b = crc32c(buf.data() + cut, buf.size() - cut);
    EXPECT_EQ(crc32c_extend(a, buf.data() + cut, buf.size() - cut), whole) << cut;
    EXPECT_EQ(crc32c_combine(a, b, buf.size() - cut), whole) << cut;
  }
  // A flipped bit anywhere changes it.
  std::vector<unsigned char> bad = buf;
  bad[77777] ^= 0x10;
  EXPECT_NE(crc32c(bad.data(), bad.size()), whole);
}

// Pieces hashed on several threads and joined equal one pass (lengths below,
// at and past the 4 MB piece, not a multiple of it).
TEST(Crc32c, ParallelEqualsSerial) {
  const std::vector<unsigned char> buf = random_bytes((size_t(4) << 20) * 3 + 12345, 5);
  for (size_t n : {size_t(100), size_t(4) << 20, (size_t(4) << 20) + 1, buf.size()})
    EXPECT_EQ(crc32c_parallel(buf.data(), n), crc32c_extend_portable(0, buf.data(), n)) << n;
}

TEST(Crc32c, HexRoundTrip) {
  EXPECT_EQ(crc32c_hex(0xE3069283u), "e3069283");
  EXPECT_EQ(crc32c_hex(0x0000000Au), "0000000a");
  uint32_t v = 0;
  ASSERT_TRUE(crc32c_from_hex("e3069283", &v));
  EXPECT_EQ(v, 0xE3069283u);
  ASSERT_TRUE(crc32c_from_hex("DEADBEEF", &v));
  EXPECT_EQ(v, 0xDEADBEEFu);
  for (const char* bad : {"", "e306928", "e30692830", "e306928g", "0x069283"})
    EXPECT_FALSE(crc32c_from_hex(bad, &v)) << bad;
}

}  // namespace crc32c_test
}  // namespace mt
