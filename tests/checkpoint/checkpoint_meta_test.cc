// meta.json's model configuration writes float arguments as they were given
// (0.1, not 0.10000000149011612) and reads them back bit-exactly.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <random>
#include <string>

#include "core/error.h"
#include "model/config.h"
#include "checkpoint/checkpoint_io.h"
#include "error_of.h"

namespace mt {
namespace checkpoint_meta_test {

TEST(CheckpointMeta, FloatArgumentsAreWrittenAsGiven) {
  ModelConfig c;
  c.init_method_std = 0.1f;
  c.hidden_dropout = 0.3f;
  c.layernorm_epsilon = 1e-5f;
  const std::string text = model_config_to_json(c).dump(2);
  EXPECT_NE(text.find("\"init_method_std\": 0.1,"), std::string::npos) << text;
  EXPECT_NE(text.find("\"hidden_dropout\": 0.3,"), std::string::npos) << text;
  EXPECT_NE(text.find("\"layernorm_epsilon\": 1e-05,"), std::string::npos) << text;
  EXPECT_EQ(text.find("0000000"), std::string::npos) << text;
  const ModelConfig back = model_config_from_json(nlohmann::json::parse(text));
  EXPECT_EQ(std::bit_cast<uint32_t>(back.init_method_std), std::bit_cast<uint32_t>(0.1f));
  EXPECT_EQ(std::bit_cast<uint32_t>(back.layernorm_epsilon), std::bit_cast<uint32_t>(1e-5f));
}

// Every float, through the JSON text and back, is the same bits.
TEST(CheckpointMeta, FloatsRoundTripBitExactly) {
  std::mt19937 g(3);
  for (int i = 0; i < 200000; ++i) {
    float f = std::bit_cast<float>(uint32_t(g()));
    if (!std::isfinite(f)) continue;
    const nlohmann::json j = float_as_written(f);
    const float back = nlohmann::json::parse(j.dump()).get<float>();
    ASSERT_EQ(std::bit_cast<uint32_t>(back), std::bit_cast<uint32_t>(f)) << j.dump();
  }
  for (float f : {0.f, 1.f, 3e-4f, 0.02f, 1e-6f, 10000.f, 0.95f, 1e-38f, 3.4e38f})
    EXPECT_EQ(float(float_as_written(f)), f);
}

// A checkpoint written before this (floats as the double of the float) is
// the same architecture as a run given the same flags.
TEST(CheckpointMeta, OlderLongFloatsAreTheSameArchitecture) {
  ModelConfig c;
  c.layernorm_epsilon = 1e-5f;
  nlohmann::json old = model_config_to_json(c);
  old["layernorm_epsilon"] = double(1e-5f);  // 9.999999747378752e-06
  ASSERT_NE(old, model_config_to_json(c));
  EXPECT_NO_THROW(check_same_architecture(old, model_config_to_json(c), "ckpt"));
  c.layernorm_epsilon = 1e-6f;
  EXPECT_THROW(check_same_architecture(old, model_config_to_json(c), "ckpt"), Error);
}

using test::error_of;

// One model written two ways is one architecture (issue 37): compared as
// resolved models. A real difference names a fix the parser takes.
TEST(CheckpointMeta, OneModelSpelledTwoWaysIsTheSameArchitecture) {
  ModelConfig saved;
  saved.num_layers = 2;
  saved.hidden_size = 32;
  saved.ffn_hidden_size = 128;
  saved.num_experts = 2;
  saved.moe_layer_freq = "1";
  ModelConfig run = saved;
  run.moe_layer_freq = "[1,1]";
  run.moe_ffn_hidden_size = 128;  // the default: --ffn-hidden-size
  EXPECT_NO_THROW(check_same_architecture(model_config_to_json(saved), model_config_to_json(run),
                                          "ckpt"));
  // Dense models: the MoE fields mean nothing; no GQA: the group count means nothing.
  ModelConfig dense, dense2;
  dense2.moe_router_topk = 4;
  dense2.num_query_groups = 8;
  EXPECT_NO_THROW(check_same_architecture(model_config_to_json(dense),
                                          model_config_to_json(dense2), "ckpt"));
  run.moe_layer_freq = "[0,1]";
  const std::string freq = error_of([&] {
    check_same_architecture(model_config_to_json(saved), model_config_to_json(run), "ckpt");
  });
  EXPECT_NE(freq.find("the checkpoint's model has --moe-layer-freq [1,1] but this run has [0,1]; "
                      "fix: pass --moe-layer-freq '[1,1]'"), std::string::npos) << freq;
  ModelConfig biased = dense;
  biased.disable_bias_linear = true;
  const std::string add = error_of([&] {
    check_same_architecture(model_config_to_json(biased), model_config_to_json(dense), "ckpt");
  });
  EXPECT_NE(add.find("fix: add --disable-bias-linear (the checkpoint's model)"), std::string::npos)
      << add;
  EXPECT_EQ(add.find("--disable-bias-linear true"), std::string::npos) << add;
  ModelConfig rms = dense;
  rms.normalization = "RMSNorm";
  const std::string norm = error_of([&] {
    check_same_architecture(model_config_to_json(rms), model_config_to_json(dense), "ckpt");
  });
  EXPECT_NE(norm.find("fix: pass --normalization RMSNorm (the"), std::string::npos) << norm;
}

}  // namespace checkpoint_meta_test
}  // namespace mt
