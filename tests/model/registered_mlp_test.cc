// A block registered at run time (include/megatron/block.h): the example's
// gated-GELU MLP (examples/custom_block) fills the MLP slot of a tiny model
// by its name; its parameters are the ones it declares, and the model's
// gradient of them, through the block's own backward, matches finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "../../examples/custom_block/gated_gelu_mlp.h"
#include "model/blocks/registered_mlp.h"
#include "model_test_util.h"

namespace mt {
namespace registered_mlp_test {

constexpr const char* kName = "test_gated_gelu";

void register_once() {
  const auto names = megatron::registered_mlp_blocks();
  if (std::find(names.begin(), names.end(), kName) == names.end())
    megatron::register_mlp_block(kName, std::make_shared<custom_block::GatedGeluMlp>());
}

ModelConfig gated_config() {
  register_once();
  ModelConfig c;
  c.num_layers = 2;
  c.hidden_size = 16;
  c.ffn_hidden_size = 24;
  c.num_attention_heads = 2;
  c.seq_length = 8;
  c.vocab_size = 20;
  c.make_vocab_size_divisible_by = 8;
  c.hidden_dropout = 0.1f;
  c.attention_dropout = 0.1f;
  c.init_method_std = 0.2f;
  c.mlp_kind = kName;
  c.finalize(1);
  return c;
}

TEST(RegisteredMlp, TakesTheDeclaredParameters) {
  const ModelConfig c = gated_config();
  const ParamRegistry reg(c, StageLayout{1, 2, 0, c.num_layers, true, true});
  const std::string p = layer_prefix(1) + "mlp.";
  EXPECT_FALSE(reg.has(p + "linear_fc1.weight"));
  const ParamSpec& gate = reg.get(p + "linear_gate.weight");
  EXPECT_EQ(gate.partition_dim, 0);
  EXPECT_EQ(gate.rows, 12);  // 24 rows over TP 2
  EXPECT_EQ(gate.row_offset, 12);
  EXPECT_TRUE(gate.weight_decay);
  const ParamSpec& down = reg.get(p + "linear_down.weight");
  EXPECT_EQ(down.partition_dim, 1);
  EXPECT_EQ(down.cols, 12);
  EXPECT_FLOAT_EQ(down.init_std, output_init_std(c));
  const ParamSpec& bias = reg.get(p + "linear_down.bias");
  EXPECT_TRUE(bias.tp_replicated());
  EXPECT_FALSE(bias.weight_decay);
  EXPECT_EQ(bias.layer, 1);
}

TEST(RegisteredMlp, RefusesAnUnknownNameAndATakenOne) {
  ModelConfig c = gated_config();
  c.mlp_kind = "no_such_block";
  EXPECT_THROW(ParamRegistry(c, StageLayout{0, 1, 0, c.num_layers, true, true}), Error);
  EXPECT_THROW(megatron::register_mlp_block(kName, std::make_shared<custom_block::GatedGeluMlp>()),
               Error);
  EXPECT_THROW(megatron::register_mlp_block("dense", std::make_shared<custom_block::GatedGeluMlp>()),
               Error);
}

// A block that gives its row-split weight to column_linear: refused by name
// (a column-parallel product over a column-split weight would sum wrongly under TP).
struct MisusedSplit : custom_block::GatedGeluMlp {
  void forward(float* out, const float* in, const megatron::BlockPass& pass) const override {
    pass.column_linear(pass.record(), in, kDown);
  }
};

TEST(RegisteredMlp, RefusesALinearOverAWeightSplitTheOtherWay) {
  const auto names = megatron::registered_mlp_blocks();
  if (std::find(names.begin(), names.end(), "misused_split") == names.end())
    megatron::register_mlp_block("misused_split", std::make_shared<MisusedSplit>());
  ModelConfig c = gated_config();
  c.mlp_kind = "misused_split";
  TinyGpt m(c, 1);
  m.reg.initialize(m.params, 1);
  const std::vector<int32_t> tokens(size_t(c.seq_length), 3);
  try {
    m.loss(tokens, tokens, PassContext{}, false);
    FAIL() << "column_linear over a partition_dim 1 weight was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("column_linear takes a weight of partition_dim 0"),
              std::string::npos) << e.what();
  }
}

// <grad, u> per parameter tensor against the central difference of the loss
// along u (Richardson-extrapolated), dropout on (masks fixed by seed and iteration).
TEST(RegisteredMlp, GradientMatchesFiniteDifferences) {
  const ModelConfig c = gated_config();
  const int64_t b = 2;
  TinyGpt m(c, b);
  m.reg.initialize(m.params, 42);
  std::mt19937 gen(5);
  std::vector<int32_t> tokens(size_t(b * c.seq_length)), labels(tokens.size());
  for (auto& t : tokens) t = int32_t(gen() % 20);
  for (auto& t : labels) t = int32_t(gen() % 20);
  std::normal_distribution<float> nd(0.f, 0.1f);
  for (const ParamSpec& p : m.reg.params())  // biases and norms away from 0 and 1
    if (p.init != Init::kNormal)
      for (int64_t i = 0; i < p.numel(); ++i) m.params[p.offset + i] += nd(gen);
  PassContext ctx;
  ctx.seed = 11;
  ctx.iteration = 2;
  m.zero_grads();
  m.loss(tokens, labels, ctx, true);
  const std::vector<float> grad(m.grads, m.grads + m.reg.total_floats());
  int checked = 0;
  for (const ParamSpec& p : m.reg.params()) {
    // The block's own tensors (the rest of the model: tests/model/gpt_gradient_test.cc).
    if (p.name.find(".mlp.linear_") == std::string::npos) continue;
    std::vector<float> u(size_t(p.numel()));
    double gu = 0;
    for (int64_t i = 0; i < p.numel(); ++i) {
      u[size_t(i)] = nd(gen) * 10.f;
      gu += double(u[size_t(i)]) * grad[size_t(p.offset + i)];
    }
    const std::vector<float> saved(m.params + p.offset, m.params + p.offset + p.numel());
    auto loss_at = [&](float step) {
      for (int64_t i = 0; i < p.numel(); ++i)
        m.params[p.offset + i] = saved[size_t(i)] + step * u[size_t(i)];
      return m.loss(tokens, labels, ctx, false);
    };
    auto central = [&](float eps) { return (loss_at(eps) - loss_at(-eps)) / (2.0 * eps); };
    const float eps = 4e-3f;
    const double fd = (4.0 * central(eps / 2) - central(eps)) / 3.0;
    for (int64_t i = 0; i < p.numel(); ++i) m.params[p.offset + i] = saved[size_t(i)];
    EXPECT_NEAR(gu, fd, 1e-2 * std::abs(fd) + 2e-4) << p.name;
    EXPECT_GT(std::abs(gu), 1e-4) << p.name << ": a gradient that vanishes checks nothing";
    ++checked;
  }
  EXPECT_EQ(checked, 2 * 5);  // five parameters of the block in each of the two layers
}

}  // namespace registered_mlp_test
}  // namespace mt
