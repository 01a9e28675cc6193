// The datasets' record in a checkpoint and the resume check against it.
#include "train/data_fingerprint.h"

#include <gtest/gtest.h>

#include <fstream>

#include "../temp_dir.h"

namespace mt {
namespace {

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

}  // namespace
}  // namespace mt
