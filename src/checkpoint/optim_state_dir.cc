#include "checkpoint/optim_state_dir.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace mt {

namespace fs = std::filesystem;

OptimStateDir::OptimStateDir(const std::string& rank_dir, const std::string& file_prefix,
                             const CheckpointVerifier& verifier)
    : dir_(rank_dir), files_glob_(file_prefix + "*.safetensors") {
  const std::string ext = ".safetensors";
  std::vector<std::string> paths;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(rank_dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f.rfind(file_prefix, 0) == 0 && f.size() > file_prefix.size() + ext.size() &&
        f.compare(f.size() - ext.size(), ext.size(), ext) == 0)
      paths.push_back(e.path().string());
  }
  MT_CHECK(!paths.empty(), "checkpoint has no optimizer state (no ", files_glob_, " in ",
           rank_dir, "); fix: pass --no-load-optim to start the optimizer afresh");
  std::sort(paths.begin(), paths.end());
  for (const std::string& want : verifier.recorded_files(rank_dir, file_prefix))
    MT_CHECK(std::binary_search(paths.begin(), paths.end(), want), "checkpoint file ", want,
             " is missing (its meta.json recorded it when it was saved)",
             verifier.fix_hint(want));
  for (const std::string& path : paths) {
    files_.emplace_back();
    verifier.open(files_.back(), path);
    const SafetensorsReader& r = files_.back();
    const size_t f = files_.size() - 1;
    for (const std::string& t : r.names()) has_main_ = has_main_ || t.rfind("main_param.", 0) == 0;
    const std::string slices = r.metadata_or("slices", "");
    if (slices.empty()) {  // whole tensors (the plain optimizer)
      for (const std::string& t : r.names())
        if (t.rfind("exp_avg.", 0) == 0) pieces_[t.substr(8)].push_back({f, 0, -1});
      continue;
    }
    try {
      const nlohmann::json parsed = nlohmann::json::parse(slices);
      for (const auto& item : parsed.items())
        pieces_[item.key()].push_back(
            {f, item.value().at(0).get<int64_t>(), item.value().at(1).get<int64_t>()});
    } catch (const nlohmann::json::exception& e) {
      MT_FAIL(path, ": corrupt \"slices\" metadata (", e.what(),
              "); fix: pass --no-load-optim to start the optimizer afresh");
    }
  }
  const std::string steps = files_.front().metadata_or("steps", "0");
  char* end = nullptr;
  steps_ = std::strtoll(steps.c_str(), &end, 10);
  MT_CHECK(!steps.empty() && *end == '\0' && steps_ >= 0, files_.front().path(),
           ": optimizer metadata \"steps\" is '", steps, "', not a step count; fix: pass "
           "--no-load-optim to start the optimizer afresh");
}

void OptimStateDir::read(const std::string& prefix, const std::string& name, float* dst,
                         int64_t numel) const {
  const std::string restore = "; fix: restore that directory's missing " + files_glob_ +
                              " files, or pass --no-load-optim to start the optimizer afresh";
  const auto it = pieces_.find(name);
  MT_CHECK(it != pieces_.end(), "checkpoint ", dir_, ": no ", files_glob_, " holds the "
           "optimizer state of '", name, "'", restore);
  std::vector<Piece> ps = it->second;
  for (Piece& p : ps)
    if (p.end < 0) p.end = numel;  // whole tensor
  std::sort(ps.begin(), ps.end(),
            [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
  int64_t covered = 0;
  for (const Piece& p : ps) {
    MT_CHECK(p.begin <= covered && p.end <= numel && p.begin <= p.end, "checkpoint ", dir_,
             ": the optimizer slices of '", name, "' (", numel, " elements) cover only [0, ",
             covered, ") before a slice [", p.begin, ", ", p.end, ") in ",
             files_[p.file].path(), restore);
    if (p.end > covered) {
      std::vector<float> part(size_t(p.end - p.begin));
      files_[p.file].read_f32(prefix + name, part.data(), p.end - p.begin);
      std::copy(part.begin() + (covered - p.begin), part.end(), dst + covered);
      covered = p.end;
    }
  }
  MT_CHECK(covered == numel, "checkpoint ", dir_, ": the optimizer slices of '", name,
           "' cover only [0, ", covered, ") of its ", numel, " elements", restore);
}

}  // namespace mt
