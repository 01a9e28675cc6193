// A dataset file truncated while mapped: the read that faults ends the
// process with one line naming the file and the fix (core/mapped_regions.h),
// not a bare "Bus error".
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/mapped_regions.h"
#include "data/indexed_dataset.h"
#include "temp_dir.h"

namespace mt {
namespace mapped_truncation_test {

int read_after_truncation(const std::string& path) {
  MappedFile m(path);
  if (::truncate(path.c_str(), 100) != 0) return 2;  // two pages become one partial page
  volatile unsigned char x = m.data()[3 * 4096 + 10];  // beyond the new end: SIGBUS
  return int(x);
}

TEST(MappedTruncation, NamesTheFileAndExits) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  test::TempDir dir;
  const std::string path = dir.file("tokens.bin");
  {
    std::ofstream out(path, std::ios::binary);
    std::vector<char> bytes(5 * 4096, 'x');
    out.write(bytes.data(), std::streamsize(bytes.size()));
  }
  EXPECT_EXIT(read_after_truncation(path), testing::ExitedWithCode(1),
              "\\[rank [0-9]+\\] error: .*tokens\\.bin: read at byte 12298 failed: the file is no "
              "longer the 20480 bytes it had when opened.*fix: do not modify");
}

TEST(MappedTruncation, AFaultOutsideEveryMappingKeepsTheDefaultAction) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  test::TempDir dir;
  const std::string path = dir.file("other.bin");
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  register_mapped_region(reinterpret_cast<const void*>(0x1000), 16, path);  // installs the handler
  unregister_mapped_region(reinterpret_cast<const void*>(0x1000));
  EXPECT_EXIT(raise(SIGBUS), testing::KilledBySignal(SIGBUS), "");
}

TEST(MappedTruncation, MessageNamesOffsetAndSize) {
  EXPECT_EQ(mapped_region_fault_message("/d/x.idx", 7, 9).substr(0, 69),
            "/d/x.idx: read at byte 7 failed: the file is no longer the 9 bytes it");
}

}  // namespace mapped_truncation_test
}  // namespace mt
