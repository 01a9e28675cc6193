#include "checkpoint/checkpoint_verify.h"

#include <filesystem>
#include <utility>

#include "checkpoint/crc32c.h"
#include "core/error.h"
#include "checkpoint/checkpoint_dir.h"

namespace mt {

namespace fs = std::filesystem;

nlohmann::json files_record(const std::vector<std::pair<std::string, FileChecksum>>& files) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [path, c] : files) j[path] = {{"bytes", c.bytes}, {"crc32c", crc32c_hex(c.crc32c)}};
  return j;
}

CheckpointVerifier::CheckpointVerifier(const nlohmann::json& meta, std::string load_dir,
                                       std::string iter_dir, bool verify)
    : load_dir_(std::move(load_dir)), iter_dir_(std::move(iter_dir)), verify_(verify) {
  if (!meta.contains("files")) return;
  const std::string where = iter_dir_ + "/meta.json";
  const nlohmann::json& f = meta.at("files");
  MT_CHECK(f.is_object(), "checkpoint metadata ", where, ": 'files' is not an object; the file "
           "is damaged", fix_hint(where));
  for (auto it = f.begin(); it != f.end(); ++it) {
    const nlohmann::json& r = it.value();
    uint32_t crc = 0;
    MT_CHECK(r.is_object() && r.contains("bytes") && r.at("bytes").is_number_unsigned() &&
                 r.contains("crc32c") && r.at("crc32c").is_string() &&
                 crc32c_from_hex(r.at("crc32c").get<std::string>(), &crc),
             "checkpoint metadata ", where, ": the record of '", it.key(),
             "' is not {\"bytes\": N, \"crc32c\": \"8 hex digits\"}; the file is damaged",
             fix_hint(where));
  }
  files_ = f;
  recorded_ = true;
}

std::string CheckpointVerifier::fix_hint(const std::string& path) const {
  const std::string restore = "; fix: restore " + path + " from an intact copy";
  std::string tail;
  if (path.find("/optim_dp_") != std::string::npos || path.find("/optim_edp_") != std::string::npos)
    tail = " (or pass --no-load-optim to keep the weights and start the optimizer afresh)";
  const int64_t current = latest_iteration(load_dir_);
  int64_t previous = -1;
  for (int64_t it : saved_iterations(load_dir_))
    if (it < current) previous = it;
  if (previous < 0) return restore + tail + " (" + load_dir_ + " holds no earlier iteration)";
  const std::string dir = fs::path(iter_dir_).lexically_normal().string();
  return restore + ", or resume from iteration " + std::to_string(previous) + ": move " + dir +
         " aside (mv " + dir + " " + dir + ".damaged) and write " + std::to_string(previous) +
         " into " + load_dir_ + "/" + kTrackerFile + tail;
}

void CheckpointVerifier::open(SafetensorsReader& r, const std::string& path) const {
  r.set_verify(verify_);
  r.set_corruption_hint(fix_hint(path));
  r.open(path);
  if (!verify_ || !recorded_) return;
  const std::string rel = fs::path(path).lexically_relative(iter_dir_).generic_string();
  MT_CHECK(files_.contains(rel), "checkpoint file ", path, " is not among the files its "
           "meta.json recorded when it was saved (a stray or copied-in file)", fix_hint(path));
  const nlohmann::json& rec = files_.at(rel);
  uint32_t crc = 0;
  crc32c_from_hex(rec.at("crc32c").get<std::string>(), &crc);
  r.check_file(rec.at("bytes").get<uint64_t>(), crc);
}

std::vector<std::string> CheckpointVerifier::recorded_files(const std::string& rank_dir,
                                                            const std::string& prefix) const {
  std::vector<std::string> out;
  if (!recorded_) return out;
  const std::string rel_dir = fs::path(rank_dir).lexically_relative(iter_dir_).generic_string();
  for (auto it = files_.begin(); it != files_.end(); ++it) {
    const std::string& k = it.key();
    if (k.rfind(rel_dir + "/" + prefix, 0) == 0) out.push_back(iter_dir_ + "/" + k);
  }
  return out;
}

std::string verification_note(const CheckpointVerifier& v, const std::string& iter_dir,
                              bool verify) {
  if (!verify)
    return "checkpoint " + iter_dir + ": checksums not verified (--no-verify-checkpoint-checksums)";
  if (!v.recorded())
    return "checkpoint " + iter_dir + " records no checksums (saved before they existed): "
           "loading it unverified";
  return "";
}

}  // namespace mt
