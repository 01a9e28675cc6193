// Device profiles: the shipped ones load (sources cited, numbers in range),
// a profile round-trips through JSON, and every malformed field is refused
// naming the file, the field and the fix.
#include "train/device_profile.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"

namespace mt {
namespace {

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

}  // namespace
}  // namespace mt
