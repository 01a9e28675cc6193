// The parameter list: Megatron-core names, padded vocabulary, init scaled for
// output projections, and shards that are exact slices of the full tensor.
#include "model/params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"

namespace mt {
namespace params_test {

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

// Each TP shard initialises exactly its slice of the full tensor: rows (and,
// for SwiGLU's fc1, its rows of both the gate and the up block) or columns.
void expect_shards_are_slices(const ModelConfig& c) {
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
                    fv[size_t(f.offset + p.global_row(r, tp, 2) * f.cols + col + p.col_offset)])
              << p.name << " tp_rank " << tp;
    }
  }
}

TEST(ParamRegistry, TensorParallelShardsAreSlicesOfTheFullTensor) { expect_shards_are_slices(cfg()); }

TEST(ParamRegistry, LlamaParametersPartsAndGatedRowBlocks) {
  ModelConfig c = cfg();
  c.normalization = "RMSNorm";
  c.position_embedding_type = "rope";
  c.swiglu = true;
  c.group_query_attention = true;
  c.num_query_groups = 2;
  c.disable_bias_linear = true;
  c.untie_embeddings_and_output_weights = true;
  c.finalize(2);
  expect_shards_are_slices(c);
  ParamRegistry reg(c, StageLayout{1, 2, 0, c.num_layers, true, true});
  const ParamSpec& fc1 = reg.get("decoder.layers.0.mlp.linear_fc1.weight");
  EXPECT_EQ(fc1.global_rows, 2 * c.ffn_hidden_size);
  EXPECT_EQ(fc1.row_blocks, 2);
  // TP rank 1 of 2: the second half of the gate rows, then of the up rows.
  const int64_t f = c.ffn_hidden_size;
  EXPECT_EQ(fc1.global_row(0, 1, 2), f / 2);
  EXPECT_EQ(fc1.global_row(f / 2, 1, 2), f + f / 2);
  const ParamSpec& qkv = reg.get("decoder.layers.0.self_attention.linear_qkv.weight");
  EXPECT_EQ(qkv.global_rows, (c.num_attention_heads + 2 * 2) * c.head_dim());
  EXPECT_EQ(qkv.row_blocks, 1);  // query groups are contiguous rows: TP splits groups
  for (const ParamSpec& p : reg.params()) {
    EXPECT_EQ(p.name.find(".bias"), std::string::npos) << p.name;
    EXPECT_FALSE(p.tied) << p.name;
  }
  EXPECT_FALSE(reg.has("embedding.position_embeddings.weight"));
  const ParamSpec& out = reg.get("output_layer.weight");
  EXPECT_EQ(out.part, Part::kLossHead);
  EXPECT_EQ(out.part_id(c.num_layers), c.num_layers);
  EXPECT_EQ(reg.get("embedding.word_embeddings.weight").part_id(c.num_layers), -1);
  EXPECT_EQ(reg.get("decoder.layers.1.pre_mlp_layernorm.weight").part_id(c.num_layers), 1);
  // The last stage alone holds no word embedding when the output is untied.
  ParamRegistry last(c, StageLayout{0, 1, 1, c.num_layers, false, true});
  EXPECT_FALSE(last.has("embedding.word_embeddings.weight"));
  EXPECT_TRUE(last.has("output_layer.weight"));
  int64_t total = 0;
  const ParamRegistry whole(c, StageLayout{0, 1, 0, c.num_layers, true, true});
  for (const ParamSpec& p : whole.params()) total += p.numel();
  EXPECT_EQ(total, count_parameters(c));
}

TEST(ParamRegistry, GptCountMatchesTheFormula) {
  ModelConfig c = cfg();
  c.finalize(1);
  int64_t total = 0;
  ParamRegistry reg(c, StageLayout{0, 1, 0, c.num_layers, true, true});
  for (const ParamSpec& p : reg.params()) total += p.numel();
  EXPECT_EQ(total, count_parameters(c));
  EXPECT_TRUE(reg.get("embedding.word_embeddings.weight").tied);
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

}  // namespace params_test
}  // namespace mt
