// Checksums of a checkpoint's files (issue: checkpoint integrity).
//
// Saving: every safetensors file records its tensors' CRC-32C in its header
// (checkpoint/safetensors.h), and meta.json records every file's length and
// whole-file CRC-32C under "files": {"mp_rank_TT_PPP/model.safetensors":
// {"bytes": N, "crc32c": "8 hex digits"}, ...} (paths relative to the
// iteration directory; rank 0 gathers them from every rank).
//
// Loading: each file is checked against its record when it is opened (length,
// header and the tensors' recorded CRCs, without reading the data) and each
// tensor's bytes against their CRC before they are used, so a flipped byte is
// an error naming the file and the tensor, on whichever rank reads it (the
// job then ends: nothing is loaded silently). A checkpoint saved before
// checksums existed loads unverified, said once. --no-verify-checkpoint-checksums
// skips every check (the load then reads each byte once less).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"

namespace mt {

// A file as written: its length and CRC-32C.
struct FileChecksum {
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
};

// meta.json's "files" object from (path relative to the iteration, record) pairs.
nlohmann::json files_record(const std::vector<std::pair<std::string, FileChecksum>>& files);

class CheckpointVerifier {
 public:
  // `meta`: the iteration's parsed meta.json; `load_dir`: the --load
  // directory; `iter_dir`: the iteration's directory inside it. Throws
  // naming meta.json when its "files" record is malformed.
  CheckpointVerifier(const nlohmann::json& meta, std::string load_dir, std::string iter_dir,
                     bool verify);

  // Opens `path` (a file inside iter_dir) into r and checks it against its
  // record; r then checks each tensor's bytes when they are read.
  void open(SafetensorsReader& r, const std::string& path) const;
  // The recorded files of `rank_dir` (a directory inside iter_dir) whose name
  // starts with `prefix`, as full paths; empty for a checkpoint without records.
  std::vector<std::string> recorded_files(const std::string& rank_dir,
                                          const std::string& prefix) const;
  // Whether meta.json records the files' checksums.
  bool recorded() const { return recorded_; }
  // "; fix: ..." for a damaged file of this iteration: restore it, or resume
  // from the previous iteration (how, with its number).
  std::string fix_hint(const std::string& path) const;

 private:
  std::string load_dir_, iter_dir_;
  bool verify_ = true;
  bool recorded_ = false;
  nlohmann::json files_;
};

// One line for the log about how a load checks the checkpoint at `iter_dir`
// ("" when all is verified as usual).
std::string verification_note(const CheckpointVerifier& v, const std::string& iter_dir,
                              bool verify);

}  // namespace mt
