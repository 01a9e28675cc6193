// A device profile: what `megatron plan` knows about one accelerator (or this
// CPU) and the links between them — peak FLOP/s per precision, memory and its
// bandwidth, how close GEMMs of a given size come to the peak, and an α–β
// (latency, bandwidth) pair per link level (inside a node, between nodes).
// Profiles are JSON files (configs/devices/*.json, each citing its sources);
// `megatron plan --calibrate` measures this machine's and writes cpu-here.json.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mt {

struct LinkProfile {
  double bandwidth_bytes_per_s = 0;  // β⁻¹: bytes a rank moves per second on this level
  double latency_s = 0;              // α: per message (per step of a ring collective)
};

struct DeviceProfile {
  std::string name;
  std::string source;  // where the numbers come from (datasheets, measurements)
  double memory_bytes = 0;                  // what one rank may hold
  double memory_bandwidth_bytes_per_s = 0;  // element-wise kernels and the optimizer step
  double peak_flops_fp32 = 0, peak_flops_bf16 = 0;
  // (FLOPs of one GEMM, fraction of the peak it reaches), FLOPs increasing;
  // interpolated in log(FLOPs), clamped at both ends.
  std::vector<std::pair<double, double>> gemm_efficiency;
  LinkProfile intra_node, inter_node;
  // Whether a bf16 run's TP and PP messages are bf16 (2 bytes: Megatron-LM on
  // GPUs) or fp32 (4 bytes: this program's CPU build, whose collectives are fp32).
  bool bf16_activations_on_wire = false;

  double peak_flops(bool bf16) const { return bf16 ? peak_flops_bf16 : peak_flops_fp32; }
  // Fraction of the peak a GEMM of `flops` (2·m·n·k) reaches.
  double efficiency(double flops) const;
};

// Parses and validates a profile (every field present, numbers finite and
// positive, efficiencies in (0, 1], FLOPs increasing); throws mt::Error
// naming `origin`, the field and the fix.
DeviceProfile device_profile_from_json(const nlohmann::json& j, const std::string& origin);
nlohmann::json device_profile_to_json(const DeviceProfile& d);

// The directory of the shipped profiles: $MEGATRON_DEVICES_DIR, else
// configs/devices next to the binary's directory (build/../configs/devices).
std::string devices_dir();
// `name_or_file`: a path ending in .json, or a shipped profile's name
// (a100-80gb, h100-80gb, cpu-here); throws naming what exists.
DeviceProfile load_device_profile(const std::string& name_or_file);

}  // namespace mt
