// The parameter list: Megatron-core names, padded vocabulary, init scaled for
// output projections, and shards that are exact slices of the full tensor.
#include "model/params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"

namespace mt {
namespace {

ModelConfig cfg() {
  ModelConfig c;
  c.num_layers = 4;
  c.hidden_size = 32;
  c.num_attention_heads = 4;
  c.seq_length = 16;
  c.vocab_size = 65;
  c.finalize(1);
  return c;
}

TEST(ModelConfig, PadsVocabularyAsMegatron) {
  EXPECT_EQ(padded_vocab_size(65, 128, 1), 128);
  EXPECT_EQ(padded_vocab_size(50257, 128, 1), 50304);
  EXPECT_EQ(padded_vocab_size(50257, 128, 8), 51200);
  EXPECT_EQ(cfg().ffn_hidden_size, 128);
  ModelConfig bad = cfg();
  bad.num_attention_heads = 5;
  EXPECT_THROW(bad.finalize(1), Error);
}

TEST(ParamRegistry, NamesShapesAndInit) {
  const ModelConfig c = cfg();
  ParamRegistry reg(c, StageLayout{0, 1, 0, c.num_layers, true, true});
  EXPECT_EQ(reg.params().size(), 2u + 12u * 4u + 2u);
  int64_t total = 0;
  for (const ParamSpec& p : reg.params()) total += p.numel();
  EXPECT_EQ(total, count_parameters(c));
  const ParamSpec& qkv = reg.get("decoder.layers.3.self_attention.linear_qkv.weight");
  EXPECT_EQ(qkv.rows, 96);
  EXPECT_EQ(qkv.cols, 32);
  std::vector<float> v(size_t(reg.total_floats()));
  reg.initialize(v.data(), 7);
  auto std_of = [&](const std::string& name) {
    const ParamSpec& p = reg.get(name);
    double s = 0;
    for (int64_t i = 0; i < p.numel(); ++i) s += double(v[size_t(p.offset + i)]) * v[size_t(p.offset + i)];
    return std::sqrt(s / double(p.numel()));
  };
  EXPECT_NEAR(std_of("decoder.layers.0.mlp.linear_fc1.weight"), 0.02, 0.002);
  EXPECT_NEAR(std_of("decoder.layers.0.mlp.linear_fc2.weight"), 0.02 / std::sqrt(8.0), 0.0006);
  EXPECT_EQ(v[size_t(reg.get("decoder.final_layernorm.weight").offset)], 1.f);
  EXPECT_EQ(v[size_t(reg.get("decoder.layers.1.mlp.linear_fc1.bias").offset)], 0.f);
  for (const ParamSpec& p : reg.params()) EXPECT_EQ(p.offset % 16, 0) << p.name;
  EXPECT_THROW(reg.get("no.such.weight"), Error);
}

TEST(ParamRegistry, TensorParallelShardsAreSlicesOfTheFullTensor) {
  const ModelConfig c = cfg();
  ParamRegistry full(c, StageLayout{0, 1, 0, 1, true, true});
  std::vector<float> fv(size_t(full.total_floats()));
  full.initialize(fv.data(), 3);
  for (int tp = 0; tp < 2; ++tp) {
    ParamRegistry shard(c, StageLayout{tp, 2, 0, 1, true, true});
    std::vector<float> sv(size_t(shard.total_floats()));
    shard.initialize(sv.data(), 3);
    for (const ParamSpec& p : shard.params()) {
      const ParamSpec& f = full.get(p.name);
      for (int64_t r = 0; r < p.rows; ++r)
        for (int64_t col = 0; col < p.cols; ++col)
          ASSERT_EQ(sv[size_t(p.offset + r * p.cols + col)],
                    fv[size_t(f.offset + (r + p.row_offset) * f.cols + col + p.col_offset)])
              << p.name << " tp_rank " << tp;
    }
  }
}

TEST(StageLayerRange, EvenAndUnevenSplits) {
  using R = std::pair<int64_t, int64_t>;
  EXPECT_EQ(stage_layer_range(12, 1, 0), R(0, 12));
  EXPECT_EQ(stage_layer_range(12, 4, 2), R(6, 9));
  EXPECT_EQ(stage_layer_range(12, 2, 0, 0, 3), R(0, 9));  // a light last stage
  EXPECT_EQ(stage_layer_range(12, 2, 1, 0, 3), R(9, 12));
  EXPECT_EQ(stage_layer_range(12, 4, 0, 2, 4), R(0, 2));
  EXPECT_EQ(stage_layer_range(12, 4, 1, 2, 4), R(2, 5));
  EXPECT_EQ(stage_layer_range(12, 4, 2, 2, 4), R(5, 8));
  EXPECT_EQ(stage_layer_range(12, 4, 3, 2, 4), R(8, 12));
  EXPECT_THROW(stage_layer_range(12, 4, 0, 2, 3), Error);  // 7 over 2 stages
  EXPECT_THROW(stage_layer_range(12, 1, 0, 2, 0), Error);  // needs PP > 1
}

}  // namespace
}  // namespace mt
