// The TensorBoard writer's bytes against hand-computed ones, and its files
// against the reader written from the format's specification.
#include "observe/tensorboard_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "temp_dir.h"
#include "tensorboard_reader.h"

namespace mt {
namespace tensorboard_writer_test {

std::string hex(const std::string& bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

TEST(TensorBoardWriter, MaskedCrcOfTheCheckValue) {
  // CRC-32C("123456789") = 0xe3069283 (the CRC's check value); rotated right by
  // 15: (0xe3069283 >> 15) | (0xe3069283 << 17) = 0x0001c60d | 0x25060000 =
  // 0x2507c60d; plus 0xa282ead8 (mod 2^32) = 0xc78ab0e5.
  EXPECT_EQ(tfrecord_masked_crc("123456789", 9), 0xc78ab0e5u);
  EXPECT_EQ(test::spec_masked_crc(reinterpret_cast<const uint8_t*>("123456789"), 9), 0xc78ab0e5u);
}

TEST(TensorBoardWriter, ScalarEventBytesByHand) {
  // Event{wall_time: 1.5, step: 3, summary{value{tag: "a", simple_value: 2}}}:
  //   09 | 1.5 as a little-endian double (0x3ff8000000000000)      field 1, fixed64
  //   10 03                                                         field 2, varint 3
  //   2a 0a | Summary (10 bytes):                                   field 5, length 10
  //     0a 08 | Value (8 bytes):                                    field 1, length 8
  //       0a 01 61                                                  tag "a"
  //       15 00 00 00 40                                            field 2, fixed32 2.0f
  const std::string event = event_scalar(1.5, 3, "a", 2.0f);
  EXPECT_EQ(hex(event), "09000000000000f83f10032a0a0a080a01611500000040");
  // TFRecord: length 23 (uint64 LE), masked CRC of those 8 bytes, the event, masked CRC of it.
  const std::string record = tfrecord(event);
  EXPECT_EQ(hex(record.substr(0, 8)), "1700000000000000");
  const std::string len_crc = record.substr(8, 4), data_crc = record.substr(12 + 23, 4);
  uint32_t a, b;
  std::memcpy(&a, len_crc.data(), 4);
  std::memcpy(&b, data_crc.data(), 4);
  EXPECT_EQ(a, test::spec_masked_crc(reinterpret_cast<const uint8_t*>(record.data()), 8));
  EXPECT_EQ(b, test::spec_masked_crc(reinterpret_cast<const uint8_t*>(event.data()), 23));
  EXPECT_EQ(hex(record),
            "1700000000000000e7cef81e09000000000000f83f10032a0a0a080a01611500000040e81c3a9d");
}

TEST(TensorBoardWriter, FileVersionEventAndLargeSteps) {
  // Step 0 is protobuf's default: no field 2.
  EXPECT_EQ(hex(event_file_version(1.5)), "09000000000000f83f1a0d627261696e2e4576656e743a32");
  // 300 = 0b10_0101100: varint ac 02.
  EXPECT_EQ(hex(event_scalar(1.5, 300, "a", 2.0f)).substr(18, 6), "10ac02");
}

TEST(TensorBoardWriter, WritesAFileTheSpecReaderDecodes) {
  test::TempDir dir;
  std::string path;
  {
    TensorBoardWriter w(dir.file("tb"));  // created if missing
    path = w.path();
    w.add_scalar("lm loss", 3.25, 1);
    w.add_scalar("learning-rate", 1e-4, 1);
    w.add_scalar("lm loss", 2.5, 1000000);
    w.flush();
    // Flushed: readable while the writer is still open (a live TensorBoard).
    EXPECT_EQ(test::read_events_file(path).size(), 4u);
  }
  const std::string name = std::filesystem::path(path).filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  const std::vector<test::TbEvent> events = test::read_events_file(path);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_TRUE(events[0].values.empty());
  EXPECT_GT(events[0].wall_time, 1.6e9);
  const test::TbSeries s = test::scalars_by_tag(events);
  EXPECT_EQ(s.at("lm loss").at(1), 3.25f);
  EXPECT_EQ(s.at("lm loss").at(1000000), 2.5f);
  EXPECT_EQ(s.at("learning-rate").at(1), float(1e-4));
  // A second writer in the same directory opens another file.
  TensorBoardWriter again(dir.file("tb"));
  EXPECT_NE(again.path(), path);
  EXPECT_EQ(test::events_files(dir.file("tb")).size(), 2u);
}

TEST(TensorBoardWriter, RefusesAFileOrAPathUnderAFile) {
  test::TempDir dir;
  std::ofstream(dir.file("a_file")) << "x";
  try {
    TensorBoardWriter w(dir.file("a_file"));
    FAIL() << "a regular file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--tensorboard-dir " + dir.file("a_file") +
                                         " is not a directory"),
              std::string::npos)
        << e.what();
  }
  try {
    TensorBoardWriter w(dir.file("a_file/tb"));
    FAIL() << "a directory under a file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create the --tensorboard-dir directory " +
                                         dir.file("a_file/tb")),
              std::string::npos)
        << e.what();
  }
}

}  // namespace tensorboard_writer_test
}  // namespace mt
