#include "plan/device_profile.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"

namespace mt {

double DeviceProfile::efficiency(double flops, bool bf16) const {
  const auto& e = bf16 && !gemm_efficiency_bf16.empty() ? gemm_efficiency_bf16 : gemm_efficiency;
  if (flops <= e.front().first) return e.front().second;
  if (flops >= e.back().first) return e.back().second;
  for (size_t i = 1; i < e.size(); ++i)
    if (flops <= e[i].first) {
      const double t = std::log(flops / e[i - 1].first) / std::log(e[i].first / e[i - 1].first);
      return e[i - 1].second + t * (e[i].second - e[i - 1].second);
    }
  return e.back().second;
}

double DeviceProfile::attention_seconds(double flops, double seq, bool bf16, bool dropout) const {
  if (attention.empty()) return flops / (peak_flops(bf16) * efficiency(flops, bf16));
  auto rate = [&](const AttentionRate& r) {
    return bf16 ? (dropout ? r.bf16_dropout : r.bf16) : (dropout ? r.fp32_dropout : r.fp32);
  };
  const auto& a = attention;
  if (seq <= a.front().seq_length) return flops / rate(a.front());
  if (seq >= a.back().seq_length) return flops / rate(a.back());
  size_t i = 1;
  while (seq > a[i].seq_length) ++i;
  const double t =
      std::log(seq / a[i - 1].seq_length) / std::log(a[i].seq_length / a[i - 1].seq_length);
  return flops / (rate(a[i - 1]) + t * (rate(a[i]) - rate(a[i - 1])));
}

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllGather: return "all_gather";
    case Collective::kP2p: return "p2p";
    case Collective::kCount: break;
  }
  return "?";
}

AlphaBeta LinkProfile::of(Collective c) const {
  const AlphaBeta& m = collectives[size_t(c)];
  return m.bandwidth_bytes_per_s > 0 ? m : AlphaBeta{bandwidth_bytes_per_s, latency_s};
}

namespace {

using nlohmann::json;

// The keys of object `j` must be exactly `keys`, plus any of `optional`.
void check_keys(const json& j, const std::set<std::string>& keys, const std::string& where,
                const std::set<std::string>& optional = {}) {
  MT_CHECK(j.is_object(), where, " must be a JSON object; fix: see configs/devices/a100-80gb.json");
  for (const auto& [k, v] : j.items())
    MT_CHECK(keys.count(k) > 0 || optional.count(k) > 0, where, ": unknown field '", k,
             "'; fix: remove it (fields: see configs/devices/a100-80gb.json and docs/plan.md)");
  for (const std::string& k : keys)
    MT_CHECK(j.contains(k), where, ": field '", k, "' is missing; fix: add it");
}

double positive(const json& j, const std::string& key, const std::string& where) {
  const json& v = j.at(key);
  MT_CHECK(v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0, where, ": '",
           key, "' is ", v.dump(), "; fix: a finite number > 0");
  return v.get<double>();
}

AlphaBeta alpha_beta(const json& j, const std::string& where) {
  check_keys(j, {"bandwidth_bytes_per_s", "latency_s"}, where);
  return {positive(j, "bandwidth_bytes_per_s", where), positive(j, "latency_s", where)};
}

LinkProfile link(const json& j, const std::string& where) {
  check_keys(j, {"bandwidth_bytes_per_s", "latency_s"}, where, {"collectives"});
  LinkProfile l;
  l.bandwidth_bytes_per_s = positive(j, "bandwidth_bytes_per_s", where);
  l.latency_s = positive(j, "latency_s", where);
  if (j.contains("collectives")) {
    std::set<std::string> kinds;
    for (size_t c = 0; c < size_t(Collective::kCount); ++c)
      kinds.insert(collective_name(Collective(c)));
    check_keys(j.at("collectives"), kinds, where + ".collectives");
    for (size_t c = 0; c < size_t(Collective::kCount); ++c) {
      const char* k = collective_name(Collective(c));
      l.collectives[c] = alpha_beta(j.at("collectives").at(k), where + ".collectives." + k);
    }
  }
  return l;
}

// A list of {"flops", "fraction"} by increasing FLOPs, fractions in (0, 1].
std::vector<std::pair<double, double>> efficiency_curve(const json& e, const std::string& w,
                                                        const std::string& key) {
  MT_CHECK(e.is_array() && !e.empty(), w, ": '", key,
           "' must be a non-empty list of {\"flops\", \"fraction\"}");
  std::vector<std::pair<double, double>> out;
  for (size_t i = 0; i < e.size(); ++i) {
    const std::string wi = w + " " + key + "[" + std::to_string(i) + "]";
    check_keys(e[i], {"flops", "fraction"}, wi);
    const double f = positive(e[i], "flops", wi), r = positive(e[i], "fraction", wi);
    MT_CHECK(r <= 1, wi, ": fraction ", r, " of the peak is above 1; fix: raise the peak or "
             "lower the fraction");
    MT_CHECK(out.empty() || f > out.back().first, wi, ": flops ", f,
             " is not above the previous entry's ", out.empty() ? 0.0 : out.back().first,
             "; fix: list the points by increasing flops");
    out.push_back({f, r});
  }
  return out;
}

}  // namespace

DeviceProfile device_profile_from_json(const json& j, const std::string& origin) {
  const std::string w = "device profile " + origin;
  check_keys(j, {"name", "sources", "memory_bytes", "memory_bandwidth_bytes_per_s", "peak_flops",
                 "gemm_efficiency", "links", "bf16_activations_on_wire"},
             w, {"gemm_efficiency_bf16", "attention_flops_per_s", "cores_per_node"});
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
  d.gemm_efficiency = efficiency_curve(j.at("gemm_efficiency"), w, "gemm_efficiency");
  if (j.contains("gemm_efficiency_bf16"))
    d.gemm_efficiency_bf16 =
        efficiency_curve(j.at("gemm_efficiency_bf16"), w, "gemm_efficiency_bf16");
  if (j.contains("attention_flops_per_s")) {
    const json& a = j.at("attention_flops_per_s");
    MT_CHECK(a.is_array() && !a.empty(), w, ": 'attention_flops_per_s' must be a non-empty list of "
             "{\"seq_length\", \"fp32\", \"bf16\", \"fp32_dropout\", \"bf16_dropout\"}");
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string wa = w + " attention_flops_per_s[" + std::to_string(i) + "]";
      check_keys(a[i], {"seq_length", "fp32", "bf16", "fp32_dropout", "bf16_dropout"}, wa);
      DeviceProfile::AttentionRate r;
      r.seq_length = positive(a[i], "seq_length", wa);
      MT_CHECK(d.attention.empty() || r.seq_length > d.attention.back().seq_length, wa,
               ": seq_length ", r.seq_length, " is not above the previous entry's",
               "; fix: list the points by increasing seq_length");
      r.fp32 = positive(a[i], "fp32", wa);
      r.bf16 = positive(a[i], "bf16", wa);
      r.fp32_dropout = positive(a[i], "fp32_dropout", wa);
      r.bf16_dropout = positive(a[i], "bf16_dropout", wa);
      d.attention.push_back(r);
    }
  }
  if (j.contains("cores_per_node")) {
    const json& c = j.at("cores_per_node");
    MT_CHECK(c.is_number_integer() && c.get<int64_t>() >= 1, w, ": 'cores_per_node' is ",
             c.dump(), "; fix: a whole number >= 1 (the hardware threads a node's ranks share), "
             "or leave it out (devices that do not share compute)");
    d.cores_per_node = c.get<int64_t>();
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
  auto ab_json = [](double bw, double lat) {
    return json{{"bandwidth_bytes_per_s", bw}, {"latency_s", lat}};
  };
  auto link_json = [&](const LinkProfile& l) {
    json o = ab_json(l.bandwidth_bytes_per_s, l.latency_s);
    if (l.collectives[0].bandwidth_bytes_per_s > 0)
      for (size_t c = 0; c < size_t(Collective::kCount); ++c)
        o["collectives"][collective_name(Collective(c))] =
            ab_json(l.collectives[c].bandwidth_bytes_per_s, l.collectives[c].latency_s);
    return o;
  };
  json out = {{"name", d.name},
          {"sources", sources},
          {"memory_bytes", d.memory_bytes},
          {"memory_bandwidth_bytes_per_s", d.memory_bandwidth_bytes_per_s},
          {"peak_flops", {{"fp32", d.peak_flops_fp32}, {"bf16", d.peak_flops_bf16}}},
          {"gemm_efficiency", eff},
          {"bf16_activations_on_wire", d.bf16_activations_on_wire},
          {"links", {{"intra_node", link_json(d.intra_node)},
                     {"inter_node", link_json(d.inter_node)}}}};
  if (!d.gemm_efficiency_bf16.empty()) {
    json e16 = json::array();
    for (const auto& [f, r] : d.gemm_efficiency_bf16)
      e16.push_back({{"flops", f}, {"fraction", r}});
    out["gemm_efficiency_bf16"] = e16;
  }
  for (const DeviceProfile::AttentionRate& r : d.attention)
    out["attention_flops_per_s"].push_back({{"seq_length", r.seq_length}, {"fp32", r.fp32},
                                            {"bf16", r.bf16}, {"fp32_dropout", r.fp32_dropout},
                                            {"bf16_dropout", r.bf16_dropout}});
  if (d.cores_per_node > 0) out["cores_per_node"] = d.cores_per_node;
  return out;
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
