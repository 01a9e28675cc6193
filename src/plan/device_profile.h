// A device profile: what `megatron plan` knows about one accelerator (or this
// CPU) and the links between them — peak FLOP/s per precision, memory and its
// bandwidth, how close GEMMs of a given size come to the peak, and an α–β
// (latency, bandwidth) pair per link level (inside a node, between nodes).
// Profiles are JSON files (configs/devices/*.json, each citing its sources);
// `megatron plan --calibrate` measures this machine's and writes cpu-here.json.
#pragma once
#include <array>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mt {

struct AlphaBeta {
  double bandwidth_bytes_per_s = 0;  // β⁻¹: bytes a rank moves per second
  double latency_s = 0;              // α: per message (per step of a ring collective)
};

// The collectives plan prices, each as a ring (or one message for p2p).
enum class Collective { kAllReduce, kReduceScatter, kAllGather, kP2p, kCount };
const char* collective_name(Collective c);  // "all_reduce", ..., the JSON keys

struct LinkProfile {
  double bandwidth_bytes_per_s = 0;  // β⁻¹: bytes a rank moves per second on this level
  double latency_s = 0;              // α: per message (per step of a ring collective)
  // Measured per collective (`--calibrate`: this program's own calls, whose
  // MPI algorithms differ by far: Open MPI's reduce-scatter of one block is
  // ~40x slower than its all-reduce of the same bytes here). A zero entry
  // (GPU profiles: NCCL's rings) means the link's own pair above.
  std::array<AlphaBeta, size_t(Collective::kCount)> collectives{};
  AlphaBeta of(Collective c) const;
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
  // Optional (JSON defaults in docs/plan.md). bf16 GEMMs' own curve (empty:
  // gemm_efficiency, scaled to peak_flops.bf16).
  std::vector<std::pair<double, double>> gemm_efficiency_bf16;
  // The causal attention core's rate (FLOPs of forward and backward together,
  // the forward's two products counted half, backward 2.5x forward) at a few
  // sequence lengths, by precision, without and with attention dropout;
  // interpolated in log(seq), clamped. Empty: a GEMM of the products' FLOPs
  // (GPUs' fused attention runs near their GEMM rate).
  struct AttentionRate {
    double seq_length = 0;
    double fp32 = 0, bf16 = 0, fp32_dropout = 0, bf16_dropout = 0;
  };
  std::vector<AttentionRate> attention;
  // Hardware threads the ranks of one node share (CPUs: 0 = every device
  // computes on its own, as GPUs do). With more ranks than cores a node's
  // ranks take turns: plan bounds the step by the node's summed work.
  int64_t cores_per_node = 0;

  double peak_flops(bool bf16) const { return bf16 ? peak_flops_bf16 : peak_flops_fp32; }
  // Fraction of the peak a GEMM of `flops` (2·m·n·k) reaches, on the
  // precision's own curve.
  double efficiency(double flops, bool bf16 = false) const;
  // Seconds of `flops` of the attention core at sequence length `seq`: the
  // measured rate, else a GEMM of those FLOPs.
  double attention_seconds(double flops, double seq, bool bf16, bool dropout) const;
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
