#include "train/device_profile.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"

namespace mt {

double DeviceProfile::efficiency(double flops) const {
  const auto& e = gemm_efficiency;
  if (flops <= e.front().first) return e.front().second;
  if (flops >= e.back().first) return e.back().second;
  for (size_t i = 1; i < e.size(); ++i)
    if (flops <= e[i].first) {
      const double t = std::log(flops / e[i - 1].first) / std::log(e[i].first / e[i - 1].first);
      return e[i - 1].second + t * (e[i].second - e[i - 1].second);
    }
  return e.back().second;
}

namespace {

using nlohmann::json;

// The keys of object `j` must be exactly `keys`.
void check_keys(const json& j, const std::set<std::string>& keys, const std::string& where) {
  MT_CHECK(j.is_object(), where, " must be a JSON object; fix: see configs/devices/a100-80gb.json");
  for (const auto& [k, v] : j.items())
    MT_CHECK(keys.count(k) > 0, where, ": unknown field '", k,
             "'; fix: remove it (fields: see configs/devices/a100-80gb.json)");
  for (const std::string& k : keys)
    MT_CHECK(j.contains(k), where, ": field '", k, "' is missing; fix: add it");
}

double positive(const json& j, const std::string& key, const std::string& where) {
  const json& v = j.at(key);
  MT_CHECK(v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0, where, ": '",
           key, "' is ", v.dump(), "; fix: a finite number > 0");
  return v.get<double>();
}

LinkProfile link(const json& j, const std::string& where) {
  check_keys(j, {"bandwidth_bytes_per_s", "latency_s"}, where);
  return {positive(j, "bandwidth_bytes_per_s", where), positive(j, "latency_s", where)};
}

}  // namespace

DeviceProfile device_profile_from_json(const json& j, const std::string& origin) {
  const std::string w = "device profile " + origin;
  check_keys(j, {"name", "sources", "memory_bytes", "memory_bandwidth_bytes_per_s", "peak_flops",
                 "gemm_efficiency", "links", "bf16_activations_on_wire"},
             w);
  DeviceProfile d;
  MT_CHECK(j.at("name").is_string() && !j.at("name").get<std::string>().empty(), w,
           ": 'name' must be a non-empty string");
  d.name = j.at("name").get<std::string>();
  MT_CHECK(j.at("sources").is_array() && !j.at("sources").empty(), w,
           ": 'sources' must be a non-empty list of strings (where the numbers come from)");
  for (const json& s : j.at("sources")) {
    MT_CHECK(s.is_string(), w, ": every entry of 'sources' must be a string, got ", s.dump());
    d.source += (d.source.empty() ? "" : "; ") + s.get<std::string>();
  }
  d.memory_bytes = positive(j, "memory_bytes", w);
  d.memory_bandwidth_bytes_per_s = positive(j, "memory_bandwidth_bytes_per_s", w);
  check_keys(j.at("peak_flops"), {"fp32", "bf16"}, w + " peak_flops");
  d.peak_flops_fp32 = positive(j.at("peak_flops"), "fp32", w + " peak_flops");
  d.peak_flops_bf16 = positive(j.at("peak_flops"), "bf16", w + " peak_flops");
  const json& e = j.at("gemm_efficiency");
  MT_CHECK(e.is_array() && !e.empty(), w,
           ": 'gemm_efficiency' must be a non-empty list of {\"flops\", \"fraction\"}");
  for (size_t i = 0; i < e.size(); ++i) {
    const std::string wi = w + " gemm_efficiency[" + std::to_string(i) + "]";
    check_keys(e[i], {"flops", "fraction"}, wi);
    const double f = positive(e[i], "flops", wi), r = positive(e[i], "fraction", wi);
    MT_CHECK(r <= 1, wi, ": fraction ", r, " of the peak is above 1; fix: raise the peak or "
             "lower the fraction");
    MT_CHECK(d.gemm_efficiency.empty() || f > d.gemm_efficiency.back().first, wi, ": flops ", f,
             " is not above the previous entry's ", d.gemm_efficiency.empty() ? 0.0
             : d.gemm_efficiency.back().first, "; fix: list the points by increasing flops");
    d.gemm_efficiency.push_back({f, r});
  }
  check_keys(j.at("links"), {"intra_node", "inter_node"}, w + " links");
  MT_CHECK(j.at("bf16_activations_on_wire").is_boolean(), w,
           ": 'bf16_activations_on_wire' must be true or false");
  d.bf16_activations_on_wire = j.at("bf16_activations_on_wire").get<bool>();
  d.intra_node = link(j.at("links").at("intra_node"), w + " links.intra_node");
  d.inter_node = link(j.at("links").at("inter_node"), w + " links.inter_node");
  return d;
}

json device_profile_to_json(const DeviceProfile& d) {
  json sources = json::array();
  size_t start = 0;
  while (start <= d.source.size()) {
    const size_t end = std::min(d.source.find("; ", start), d.source.size());
    sources.push_back(d.source.substr(start, end - start));
    start = end + 2;
  }
  json eff = json::array();
  for (const auto& [f, r] : d.gemm_efficiency) eff.push_back({{"flops", f}, {"fraction", r}});
  auto link_json = [](const LinkProfile& l) {
    return json{{"bandwidth_bytes_per_s", l.bandwidth_bytes_per_s}, {"latency_s", l.latency_s}};
  };
  return {{"name", d.name},
          {"sources", sources},
          {"memory_bytes", d.memory_bytes},
          {"memory_bandwidth_bytes_per_s", d.memory_bandwidth_bytes_per_s},
          {"peak_flops", {{"fp32", d.peak_flops_fp32}, {"bf16", d.peak_flops_bf16}}},
          {"gemm_efficiency", eff},
          {"bf16_activations_on_wire", d.bf16_activations_on_wire},
          {"links", {{"intra_node", link_json(d.intra_node)},
                     {"inter_node", link_json(d.inter_node)}}}};
}

std::string devices_dir() {
  if (const char* env = std::getenv("MEGATRON_DEVICES_DIR"); env != nullptr && *env != '\0')
    return env;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "configs/devices";
  for (const std::filesystem::path& dir :
       {exe.parent_path().parent_path() / "configs" / "devices",
        exe.parent_path().parent_path().parent_path() / "configs" / "devices"})
    if (std::filesystem::is_directory(dir, ec)) return dir.string();
  return "configs/devices";
}

DeviceProfile load_device_profile(const std::string& name_or_file) {
  const bool is_file = name_or_file.size() > 5 &&
                       name_or_file.compare(name_or_file.size() - 5, 5, ".json") == 0;
  const std::string path = is_file ? name_or_file : devices_dir() + "/" + name_or_file + ".json";
  std::ifstream in(path);
  if (!in) {
    std::string known;
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(devices_dir(), ec))
      if (f.path().extension() == ".json")
        known += (known.empty() ? "" : ", ") + f.path().stem().string();
    MT_FAIL("--device '", name_or_file, "': cannot read ", path, "; fix: one of ",
            known.empty() ? "(none found)" : known,
            " (cpu-here: run `megatron plan --calibrate` first), or a FILE.json");
  }
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    MT_FAIL("device profile ", path, " is not valid JSON: ", e.what());
  }
  return device_profile_from_json(j, path);
}

}  // namespace mt
