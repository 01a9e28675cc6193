// A registered block (the example's gated-GELU MLP, examples/custom_block)
// across ranks (CTest runs this under mpirun -n 2; a plain run is a world of
// one): the world as the TP group, with and without sequence parallelism,
// gives one rank's loss, and the block's gradient shards add up to one rank's
// gradient (<grad, u> along a direction keyed by global element index, summed
// over TP: the replicated bias's partial sums under SP, its whole gradient on
// each rank without).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>

#include "../../examples/custom_block/gated_gelu_mlp.h"
#include "comm/communicator.h"
#include "model/model_test_util.h"

namespace mt {
namespace registered_mlp_tp_test {

constexpr const char* kName = "tp_test_gated_gelu";

ModelConfig gated_config(int tp) {
  const auto names = megatron::registered_mlp_blocks();
  if (std::find(names.begin(), names.end(), kName) == names.end())
    megatron::register_mlp_block(kName, std::make_shared<custom_block::GatedGeluMlp>());
  ModelConfig c;
  c.num_layers = 2;
  c.hidden_size = 16;
  c.ffn_hidden_size = 32;
  c.num_attention_heads = 4;
  c.seq_length = 8;
  c.vocab_size = 24;
  c.make_vocab_size_divisible_by = 4;
  c.hidden_dropout = 0.1f;
  c.attention_dropout = 0.1f;
  c.init_method_std = 0.2f;
  c.mlp_kind = kName;
  c.finalize(tp);
  return c;
}

// A direction's element at a parameter's global (row, col), the same on every layout.
float direction(const std::string& name, int64_t row, int64_t col) {
  std::mt19937 gen(uint32_t(std::hash<std::string>{}(name) ^ uint64_t(row * 7919 + col)));
  return std::normal_distribution<float>(0.f, 1.f)(gen);
}

struct Pass {
  double loss = 0;
  std::vector<double> dots;  // <grad, u> of each registered-block parameter, in registry order
};

Pass run(const ParamRegistry& reg, const TensorParallel& tp, int64_t b,
         const MicroBatchInput& mb) {
  ModelRuntime rt(reg, b, tp);
  reg.initialize(rt.params, 42);
  // Biases off zero, as a trained model's (keyed by global index: the same on every layout).
  for (const ParamSpec& p : reg.params())
    if (p.init == Init::kZeros)
      for (int64_t r = 0; r < p.rows; ++r)
        rt.params[p.offset + r] = 0.1f * direction(p.name, p.global_row(r, reg.stage().tp_rank,
                                                                       reg.stage().tp_size), 0);
  rt.zero_grads();
  PassContext ctx;
  ctx.seed = 3;
  ctx.iteration = 4;
  ctx.grad_scale = float(1.0 / double(rt.sh.tokens()));
  Pass out;
  out.loss = gpt_forward(rt.w(), &rt.chunks[0].g, rt.slots()[0].act, rt.ws, rt.sh, mb, ctx) /
             double(rt.sh.tokens());
  gpt_backward(rt.w(), rt.g(), rt.slots()[0].act, rt.ws, rt.sh, ctx);
  const int64_t tp_rank = reg.stage().tp_rank, tp_size = reg.stage().tp_size;
  for (const ParamSpec& p : reg.params()) {
    if (p.name.find(".mlp.linear_") == std::string::npos) continue;
    double dot = 0;
    for (int64_t r = 0; r < p.rows; ++r)
      for (int64_t col = 0; col < p.cols; ++col)
        dot += double(rt.grads[p.offset + r * p.cols + col]) *
               direction(p.name, p.global_row(r, tp_rank, tp_size), p.col_offset + col);
    // Without SP a replicated parameter's gradient is whole on every TP rank
    // (with SP each rank holds its slab's part, which the gradient sync sums).
    if (p.tp_replicated() && !tp.sequence_parallel) dot /= double(tp_size);
    out.dots.push_back(dot);
  }
  return out;
}

void expect_tp_equals_one_rank(bool sequence_parallel) {
  const Communicator world = Communicator::world();
  const int ranks = world.size(), rank = world.rank();
  const int64_t b = 2;
  const ModelConfig c = gated_config(ranks);
  std::mt19937 gen(9);
  MicroBatchInput mb;
  for (int64_t i = 0; i < b * c.seq_length; ++i) {
    mb.tokens.push_back(int32_t(gen() % 24));
    mb.labels.push_back(int32_t(gen() % 24));
  }
  const ParamRegistry one(c, StageLayout{0, 1, 0, c.num_layers, true, true});
  const Pass ref = run(one, TensorParallel{}, b, mb);
  const ParamRegistry shard(c, StageLayout{rank, ranks, 0, c.num_layers, true, true});
  const Pass got = run(shard, TensorParallel{&world, sequence_parallel && ranks > 1}, b, mb);
  EXPECT_NEAR(got.loss, ref.loss, 1e-6) << "rank " << rank;
  ASSERT_EQ(got.dots.size(), ref.dots.size());
  ASSERT_EQ(got.dots.size(), 10u);  // five parameters in each of two layers
  std::vector<double> sum = got.dots;
  world.all_reduce_sum(sum.data(), int64_t(sum.size()));
  double worst = 0;
  for (size_t i = 0; i < sum.size(); ++i) {
    const double err = std::abs(sum[i] - ref.dots[i]) / (std::abs(ref.dots[i]) + 1e-6);
    worst = std::max(worst, err);
    EXPECT_GT(std::abs(ref.dots[i]), 1e-5) << "a vanishing gradient checks nothing, " << i;
  }
  if (rank == 0)
    std::printf("registered MLP, TP %d%s: loss %.9f vs %.9f, worst gradient error %.3g\n", ranks,
                sequence_parallel ? "+SP" : "", got.loss, ref.loss, worst);
  EXPECT_LE(worst, 1e-4);
}

TEST(RegisteredMlpRanks, TensorParallelEqualsOneRank) { expect_tp_equals_one_rank(false); }
TEST(RegisteredMlpRanks, SequenceParallelEqualsOneRank) { expect_tp_equals_one_rank(true); }

}  // namespace registered_mlp_tp_test
}  // namespace mt
