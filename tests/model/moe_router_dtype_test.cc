// --moe-router-dtype in a bf16 run (Megatron's router.py gating and
// moe_utils.py topk_routing_with_score_function): unset, the router's logits
// and its probabilities are held in bf16, the run's dtype; fp32 keeps both in
// fp32: the logits are the fp32 product of the bf16 input and weight, and the
// gates the fp32 softmax of those logits. The same weights, the same tokens,
// one MoE layer first (its input is the same in both runs).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/moe_router.h"
#include "model_test_util.h"

namespace mt {
namespace moe_router_dtype_test {

ModelConfig router_config(const std::string& router_dtype) {
  ModelConfig cfg;
  cfg.num_layers = 2;
  cfg.hidden_size = 32;
  cfg.num_attention_heads = 4;
  cfg.seq_length = 16;
  cfg.vocab_size = 40;
  cfg.make_vocab_size_divisible_by = 8;
  cfg.hidden_dropout = 0.f;
  cfg.attention_dropout = 0.f;
  cfg.init_method_std = 0.2f;  // router logits well away from 0: many bits to round
  cfg.normalization = "RMSNorm";
  cfg.position_embedding_type = "rope";
  cfg.swiglu = true;
  cfg.ffn_hidden_size = 48;
  cfg.disable_bias_linear = true;
  cfg.num_experts = 4;
  cfg.moe_ffn_hidden_size = 24;
  cfg.moe_layer_freq = "[1,1]";
  cfg.moe_router_topk = 2;
  cfg.moe_router_dtype = router_dtype;
  cfg.finalize(1);
  return cfg;
}

bool is_bf16(float x) { return f32_from_bf16(bf16_from_f32(x)) == x; }

struct RouterRun {
  // layer 0's logits (n, E), gates (n, k), router input (n, h) and weight (E, h)
  std::vector<float> logits, gate, x, w;
  double loss = 0;
};

RouterRun run_bf16(const std::string& router_dtype) {
  const ModelConfig cfg = router_config(router_dtype);
  const int64_t b = 2;
  TinyGpt m(cfg, b, MathMode::kBF16);
  std::vector<float> init(size_t(m.reg.total_floats()));
  m.reg.initialize(init.data(), 42);
  m.rt.set_params(init.data());
  std::vector<int32_t> tokens(size_t(b * cfg.seq_length)), labels(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = int32_t((i * 7 + 3) % 40);
    labels[i] = int32_t((i * 11 + 5) % 40);
  }
  RouterRun r;
  r.loss = m.loss(tokens, labels, PassContext{}, false);
  const MoeRecord& rec = std::get<MoeRecord>(m.rt.slots()[0].act.layers[0].mlp);
  const int64_t n = m.sh.local_tokens(), E = cfg.num_experts, k = cfg.moe_router_topk;
  const int64_t h = cfg.hidden_size;
  r.logits.assign(rec.logits, rec.logits + n * E);
  r.gate.assign(rec.gate, rec.gate + n * k);
  EXPECT_NE(rec.in.bf16, nullptr) << "a bf16 run's router input is bf16";
  r.x.resize(size_t(n * h));
  for (int64_t i = 0; i < n * h; ++i) r.x[size_t(i)] = f32_from_bf16(rec.in.bf16[i]);
  for (size_t i = 0; i < m.reg.params().size(); ++i)
    if (m.reg.params()[i].name == "decoder.layers.0.mlp.router.weight") {
      r.w.resize(size_t(E * h));
      m.rt.get_param(i, r.w.data());
    }
  EXPECT_EQ(r.w.size(), size_t(E * h));
  return r;
}

TEST(MoeRouterDtype, Fp32KeepsTheRoutersLogitsAndGatesInFp32InABf16Run) {
  const RouterRun dflt = run_bf16(""), fp32 = run_bf16("fp32");
  ASSERT_EQ(dflt.x, fp32.x) << "layer 0's router input must not depend on the flag";
  const int64_t E = 4, k = 2, h = 32, n = int64_t(dflt.logits.size()) / E;
  // fp32: the logits are the product of the bf16 operands (exact in double),
  // to fp32 round-off; some are not bf16 values.
  int not_bf16 = 0;
  double worst = 0;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t e = 0; e < E; ++e) {
      double ref = 0;
      for (int64_t i = 0; i < h; ++i)
        ref += double(fp32.x[size_t(t * h + i)]) * double(fp32.w[size_t(e * h + i)]);
      const float got = fp32.logits[size_t(t * E + e)];
      worst = std::max(worst, std::abs(double(got) - ref) / std::max(std::abs(ref), 1e-3));
      not_bf16 += !is_bf16(got);
    }
  EXPECT_LT(worst, 1e-5) << "fp32 router logits vs the double product";
  EXPECT_GT(not_bf16, n * E / 2) << "fp32 logits rounded as if bf16";
  // Unset (Megatron's default): the same logits rounded to bf16.
  std::vector<float> rounded = fp32.logits;
  moe_router_round(rounded.data(), int64_t(rounded.size()), MathMode::kBF16);
  EXPECT_EQ(dflt.logits, rounded);
  // The gates: bf16 values by default; fp32 ones (softmax over the chosen
  // fp32 logits) with the flag.
  int gates_not_bf16 = 0;
  for (float g : dflt.gate) EXPECT_TRUE(is_bf16(g)) << g;
  for (float g : fp32.gate) gates_not_bf16 += !is_bf16(g);
  EXPECT_GT(gates_not_bf16, n * k / 2);
  std::vector<int32_t> expert(size_t(n * k));
  std::vector<float> prob(size_t(n * k)), scores(size_t(n * E));
  moe_topk_forward(expert.data(), prob.data(), scores.data(), fp32.logits.data(), n, E, k, false);
  EXPECT_EQ(fp32.gate, prob);
  EXPECT_NE(dflt.loss, fp32.loss) << "the flag changes the bf16 run's arithmetic";
}

}  // namespace moe_router_dtype_test
}  // namespace mt
