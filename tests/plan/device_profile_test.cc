// Device profiles: the shipped ones load (sources cited, numbers in range),
// a profile round-trips through JSON, and every malformed field is refused
// naming the file, the field and the fix.
#include "plan/device_profile.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"

namespace mt {
namespace device_profile_test {

const std::string kDir = std::string(MT_SOURCE_DIR) + "/configs/devices";

nlohmann::json shipped(const std::string& name) {
  std::ifstream in(kDir + "/" + name + ".json");
  return nlohmann::json::parse(in);
}

std::string error_of(const nlohmann::json& j) {
  try {
    device_profile_from_json(j, "test.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceProfile, ShippedProfilesLoadWithTheirSources) {
  ::setenv("MEGATRON_DEVICES_DIR", kDir.c_str(), 1);
  for (const char* name : {"a100-80gb", "h100-80gb"}) {
    const DeviceProfile d = load_device_profile(name);
    EXPECT_EQ(d.name, name);
    EXPECT_NE(d.source.find("datasheet"), std::string::npos) << name;
    EXPECT_GT(d.peak_flops_bf16, d.peak_flops_fp32) << name;
    EXPECT_GT(d.intra_node.bandwidth_bytes_per_s, d.inter_node.bandwidth_bytes_per_s) << name;
    EXPECT_NEAR(d.memory_bytes, 80.0 * (1 << 30), 1) << name;
    EXPECT_TRUE(d.bf16_activations_on_wire) << name;
    // Larger GEMMs never run less efficiently.
    for (size_t i = 1; i < d.gemm_efficiency.size(); ++i)
      EXPECT_GE(d.gemm_efficiency[i].second, d.gemm_efficiency[i - 1].second) << name;
  }
  EXPECT_DOUBLE_EQ(load_device_profile("a100-80gb").peak_flops_bf16, 312e12);
  EXPECT_DOUBLE_EQ(load_device_profile("h100-80gb").peak_flops_bf16, 989e12);
  const DeviceProfile a = load_device_profile(kDir + "/a100-80gb.json");  // as a file
  const DeviceProfile b = device_profile_from_json(device_profile_to_json(a), "round trip");
  EXPECT_EQ(device_profile_to_json(a), device_profile_to_json(b));
  try {
    load_device_profile("b200");
    FAIL() << "an unknown device loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a100-80gb"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--calibrate"), std::string::npos) << e.what();
  }
}

TEST(DeviceProfile, MalformedFieldsAreNamed) {
  const nlohmann::json good = shipped("a100-80gb");
  EXPECT_EQ(error_of(good), "");
  nlohmann::json j = good;
  j.erase("memory_bytes");
  EXPECT_NE(error_of(j).find("field 'memory_bytes' is missing"), std::string::npos) << error_of(j);
  j = good;
  j["memroy_bytes"] = 1;
  EXPECT_NE(error_of(j).find("unknown field 'memroy_bytes'"), std::string::npos) << error_of(j);
  j = good;
  j["peak_flops"]["bf16"] = -1;
  EXPECT_NE(error_of(j).find("'bf16' is -1"), std::string::npos) << error_of(j);
  j = good;
  j["gemm_efficiency"][1]["fraction"] = 1.5;
  EXPECT_NE(error_of(j).find("fraction 1.5 of the peak is above 1"), std::string::npos)
      << error_of(j);
  j = good;
  j["gemm_efficiency"][2]["flops"] = 1e3;
  EXPECT_NE(error_of(j).find("increasing flops"), std::string::npos) << error_of(j);
  j = good;
  j["links"]["inter_node"].erase("latency_s");
  EXPECT_NE(error_of(j).find("links.inter_node: field 'latency_s' is missing"), std::string::npos)
      << error_of(j);
  j = good;
  j["bf16_activations_on_wire"] = "yes";
  EXPECT_NE(error_of(j).find("true or false"), std::string::npos) << error_of(j);
  j = good;
  j["sources"] = nlohmann::json::array();
  EXPECT_NE(error_of(j).find("'sources' must be a non-empty list"), std::string::npos)
      << error_of(j);
}

// The optional fields --calibrate writes (bf16 curve, attention rates,
// cores, per-collective α–β) round-trip, change what they must, and are
// refused when malformed; the GPU profiles' defaults are the old behaviour.
TEST(DeviceProfile, OptionalMeasuredFields) {
  nlohmann::json j = shipped("a100-80gb");
  const DeviceProfile gpu = device_profile_from_json(j, "a100");
  EXPECT_TRUE(gpu.gemm_efficiency_bf16.empty());
  EXPECT_TRUE(gpu.attention.empty());
  EXPECT_EQ(gpu.cores_per_node, 0);
  // Defaults: bf16 on the one curve, attention as a GEMM, collectives on the link's pair.
  EXPECT_DOUBLE_EQ(gpu.efficiency(1e10, true), gpu.efficiency(1e10, false));
  EXPECT_DOUBLE_EQ(gpu.attention_seconds(1e10, 2048, true, true),
                   1e10 / (312e12 * gpu.efficiency(1e10, true)));
  EXPECT_DOUBLE_EQ(gpu.intra_node.of(Collective::kReduceScatter).bandwidth_bytes_per_s, 230e9);

  j["gemm_efficiency_bf16"] = {{{"flops", 1e6}, {"fraction", 0.2}},
                               {{"flops", 1e9}, {"fraction", 0.9}}};
  j["attention_flops_per_s"] = {{{"seq_length", 256}, {"fp32", 1e12}, {"bf16", 2e12},
                                 {"fp32_dropout", 5e11}, {"bf16_dropout", 1e12}},
                                {{"seq_length", 4096}, {"fp32", 3e12}, {"bf16", 4e12},
                                 {"fp32_dropout", 7e11}, {"bf16_dropout", 3e12}}};
  j["cores_per_node"] = 16;
  nlohmann::json coll;
  for (const char* k : {"all_reduce", "reduce_scatter", "all_gather", "p2p"})
    coll[k] = {{"bandwidth_bytes_per_s", 1e9}, {"latency_s", 1e-5}};
  coll["reduce_scatter"]["bandwidth_bytes_per_s"] = 1e8;
  j["links"]["intra_node"]["collectives"] = coll;
  const DeviceProfile d = device_profile_from_json(j, "measured");
  EXPECT_EQ(device_profile_to_json(d), device_profile_to_json(device_profile_from_json(
                                           device_profile_to_json(d), "round trip")));
  EXPECT_DOUBLE_EQ(d.efficiency(1e9, true), 0.9);
  EXPECT_DOUBLE_EQ(d.efficiency(1e9, false), gpu.efficiency(1e9, false));  // fp32 curve kept
  EXPECT_DOUBLE_EQ(d.attention_seconds(1e12, 256, false, false), 1.0);
  EXPECT_DOUBLE_EQ(d.attention_seconds(1e12, 256, false, true), 2.0);   // dropout's own rate
  EXPECT_DOUBLE_EQ(d.attention_seconds(1e12, 8192, true, false), 0.25);  // clamped at 4096
  // 1024 is halfway between 256 and 4096 in log(seq): 2e12 FLOP/s.
  EXPECT_NEAR(d.attention_seconds(1e12, 1024, false, false), 0.5, 1e-12);
  EXPECT_EQ(d.cores_per_node, 16);
  EXPECT_DOUBLE_EQ(d.intra_node.of(Collective::kReduceScatter).bandwidth_bytes_per_s, 1e8);
  EXPECT_DOUBLE_EQ(d.intra_node.of(Collective::kAllGather).latency_s, 1e-5);
  EXPECT_DOUBLE_EQ(d.inter_node.of(Collective::kReduceScatter).bandwidth_bytes_per_s, 22e9);

  nlohmann::json bad = j;
  bad["cores_per_node"] = 1.5;
  EXPECT_NE(error_of(bad).find("'cores_per_node' is 1.5"), std::string::npos) << error_of(bad);
  bad["cores_per_node"] = 0;
  EXPECT_NE(error_of(bad).find("a whole number >= 1"), std::string::npos) << error_of(bad);
  bad = j;
  bad["attention_flops_per_s"][1]["seq_length"] = 128;
  EXPECT_NE(error_of(bad).find("increasing seq_length"), std::string::npos) << error_of(bad);
  bad = j;
  bad["attention_flops_per_s"][0].erase("bf16_dropout");
  EXPECT_NE(error_of(bad).find("field 'bf16_dropout' is missing"), std::string::npos)
      << error_of(bad);
  bad = j;
  bad["links"]["intra_node"]["collectives"].erase("p2p");
  EXPECT_NE(error_of(bad).find("links.intra_node.collectives: field 'p2p' is missing"),
            std::string::npos) << error_of(bad);
  bad = j;
  bad["links"]["intra_node"]["collectives"]["all_gather"]["latency_s"] = 0;
  EXPECT_NE(error_of(bad).find("collectives.all_gather: 'latency_s' is 0"), std::string::npos)
      << error_of(bad);
  bad = j;
  bad["gemm_efficiency_bf16"][0]["fraction"] = 1.2;
  EXPECT_NE(error_of(bad).find("gemm_efficiency_bf16[0]: fraction 1.2"), std::string::npos)
      << error_of(bad);
}

}  // namespace device_profile_test
}  // namespace mt
