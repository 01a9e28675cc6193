// HostBuffer's resident-memory measurement and the process RSS readers.
#include "core/arena.h"

#include <gtest/gtest.h>

#include <utility>

namespace mt {
namespace arena_test {

constexpr size_t kMiB = size_t(1) << 20;

TEST(HostBuffer, ResidentBytesMatchTheTouchedSize) {
  // 64 MiB is above glibc's largest mmap threshold, so the pages are fresh and
  // the first touch must make (nearly) all of them resident.
  const size_t bytes = 64 * kMiB;
  HostBuffer buf(bytes);
  ASSERT_EQ(buf.size(), bytes);
  EXPECT_GE(buf.resident_bytes(), bytes * 9 / 10) << "first touch added too little RSS";
  EXPECT_LE(buf.resident_bytes(), bytes + 4 * kMiB) << "more RSS than the buffer plus slack";
  EXPECT_GE(current_rss_bytes(), buf.resident_bytes());
}

TEST(HostBuffer, SizeRoundsToHugePagesAndEmptyBufferIsFree) {
  HostBuffer small(100);
  EXPECT_EQ(small.size(), 2 * kMiB);
  EXPECT_LE(small.resident_bytes(), 2 * kMiB + kMiB);
  HostBuffer none(0);
  EXPECT_EQ(none.size(), 0u);
  EXPECT_EQ(none.resident_bytes(), 0u);
  EXPECT_EQ(none.data(), nullptr);
}

TEST(HostBuffer, MoveCarriesTheMeasurement) {
  HostBuffer a(8 * kMiB);
  const size_t resident = a.resident_bytes();
  char* data = a.data();
  HostBuffer b(std::move(a));
  EXPECT_EQ(b.resident_bytes(), resident);
  EXPECT_EQ(b.data(), data);
  EXPECT_EQ(a.resident_bytes(), 0u);
  EXPECT_EQ(a.size(), 0u);
  HostBuffer c;
  c = std::move(b);
  EXPECT_EQ(c.resident_bytes(), resident);
  EXPECT_EQ(c.size(), 8 * kMiB);
  EXPECT_EQ(b.resident_bytes(), 0u);
}

TEST(Rss, PeakCoversATouchedBufferAfterItIsFreed) {
  const size_t before = current_rss_bytes();
  ASSERT_GT(before, 0u) << "/proc/self/statm unreadable";
  const size_t bytes = 48 * kMiB;
  {
    HostBuffer buf(bytes);
    EXPECT_GE(current_rss_bytes(), before + bytes * 9 / 10);
  }
  // The buffer is unmapped again; the high-water mark remembers it.
  const size_t peak = peak_rss_bytes();
  EXPECT_GE(peak, before + bytes * 9 / 10);
  EXPECT_GE(peak, current_rss_bytes());
  EXPECT_LT(current_rss_bytes(), before + bytes / 2) << "freed buffer still resident";
}

}  // namespace arena_test
}  // namespace mt
