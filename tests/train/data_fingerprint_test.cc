// The datasets' record in a checkpoint and the resume check against it.
#include "train/data_fingerprint.h"

#include <gtest/gtest.h>

#include <fstream>

#include "../temp_dir.h"

namespace mt {
namespace data_fingerprint_test {

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(DataFingerprint, SameContentsPassAndAnyChangeIsNamed) {
  test::TempDir d;
  const std::string prefix = d.file("corpus_text_document");
  write_bytes(prefix + ".bin", std::string(1000, 'a'));
  write_bytes(prefix + ".idx", "MMIDIDX index");
  const nlohmann::json saved = dataset_fingerprints({prefix});
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].at("bin_bytes"), 1000);
  EXPECT_EQ(saved[0].at("idx_crc32c").get<std::string>().size(), 8u);
  EXPECT_EQ(changed_dataset(saved, dataset_fingerprints({prefix}), "ck"), "");

  // One byte flipped, same size: the checksum names it.
  std::string bin(1000, 'a');
  bin[500] = 'b';
  write_bytes(prefix + ".bin", bin);
  const std::string flipped = changed_dataset(saved, dataset_fingerprints({prefix}), "ck");
  EXPECT_NE(flipped.find("--data-path " + prefix + " changed since --load ck"), std::string::npos)
      << flipped;
  EXPECT_NE(flipped.find(".bin has CRC-32C"), std::string::npos) << flipped;
  EXPECT_NE(flipped.find("--allow-changed-data"), std::string::npos) << flipped;

  // Another size of the index.
  write_bytes(prefix + ".bin", std::string(1000, 'a'));
  write_bytes(prefix + ".idx", "MMIDIDX index, longer");
  const std::string grown = changed_dataset(saved, dataset_fingerprints({prefix}), "ck");
  EXPECT_NE(grown.find(".idx has 21 bytes, 13 when saved"), std::string::npos) << grown;
}

TEST(DataFingerprint, OtherPathsAndOldCheckpointsAreNotChanges) {
  test::TempDir d;
  for (const char* name : {"a", "b"}) {
    write_bytes(d.file(std::string(name) + ".bin"), name);
    write_bytes(d.file(std::string(name) + ".idx"), name);
  }
  const nlohmann::json a = dataset_fingerprints({d.file("a")});
  EXPECT_EQ(changed_dataset(a, dataset_fingerprints({d.file("b")}), "ck"), "");
  EXPECT_EQ(changed_dataset(nlohmann::json(), a, "ck"), "");
  // A missing dataset is left to its reader's message.
  EXPECT_TRUE(dataset_fingerprints({d.file("missing")}).empty());
}

// --mock-data's record: what the documents are; a switch to or from a data
// path is one line, the same mock documents none.
TEST(DataFingerprint, MockDataIsRecordedAndASwitchOfSourceNoted) {
  test::TempDir d;
  write_bytes(d.file("a.bin"), "a");
  write_bytes(d.file("a.idx"), "a");
  const nlohmann::json real = dataset_fingerprints({d.file("a")});
  const nlohmann::json mock = nlohmann::json::array({mock_data_record(128, 127)});
  EXPECT_EQ(mock[0].at("mock"), "MockGPTDataset");
  EXPECT_EQ(mock[0].at("documents"), 100000);
  EXPECT_EQ(mock[0].at("split"), "1,1,1");
  EXPECT_EQ(mock[0].at("eod"), 127);
  EXPECT_EQ(changed_data_source(mock, mock, "ck"), "");
  EXPECT_EQ(changed_data_source(real, real, "ck"), "");
  EXPECT_EQ(changed_data_source(nlohmann::json(), mock, "ck"), "");  // saved before records
  const std::string to_real = changed_data_source(mock, real, "ck");
  EXPECT_NE(to_real.find("--load ck was trained on --mock-data and this run reads a data path"),
            std::string::npos)
      << to_real;
  EXPECT_NE(changed_data_source(real, mock, "ck").find("this run reads --mock-data"),
            std::string::npos);
  const nlohmann::json other = nlohmann::json::array({mock_data_record(51, 50)});
  EXPECT_NE(changed_data_source(mock, other, "ck").find("other mock documents"),
            std::string::npos);
  // The contents check reads past mock records either way.
  EXPECT_EQ(changed_dataset(mock, real, "ck"), "");
  EXPECT_EQ(changed_dataset(real, mock, "ck"), "");
}

}  // namespace data_fingerprint_test
}  // namespace mt
