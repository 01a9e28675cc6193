// Megatron's OptimizerParamScheduler here (optim/param_scheduler.h,
// wd_schedule.h): the weight decay per iteration against Megatron's get_wd
// written out in the test (in samples, as Megatron counts), applied by the
// optimizer's step; --decoupled-lr moves only the word embedding and the
// output layer; --optimizer sgd's step against torch's formulas.
#include "optim/param_scheduler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "optim/optimizer.h"

namespace mt {
namespace param_scheduler_test {

// Megatron's get_wd (optimizer_param_scheduler.py), in samples.
double megatron_wd(double num_steps, double incr_steps, double start, double end,
                   const char* style) {
  if (num_steps > incr_steps) return end;
  if (std::string(style) == "constant") return end;
  const double ratio = num_steps / incr_steps;
  const double coeff = std::string(style) == "linear"
                           ? ratio
                           : 0.5 * (std::cos(M_PI * (1 - ratio)) + 1.0);
  return start + coeff * (end - start);
}

TEST(WdSchedule, MatchesMegatronGetWd) {
  const int64_t iters = 7, gbs = 8;  // wd_incr_steps = train_iters x global batch
  for (const char* style : {"constant", "linear", "cosine"}) {
    WdSchedule s;
    s.style = parse_wd_incr_style(style);
    s.start_wd = std::string(style) == "constant" ? 0.1 : 0.01;
    s.end_wd = 0.1;
    s.incr_iters = double(iters);
    s.validate();
    for (int64_t k = 1; k <= iters + 2; ++k)  // iteration k: num_steps (k - 1) x gbs
      EXPECT_NEAR(s.wd_at(double(k - 1)),
                  megatron_wd(double((k - 1) * gbs), double(iters * gbs), s.start_wd, s.end_wd,
                              style),
                  1e-15)
          << style << " iteration " << k;
  }
  WdSchedule bad;
  bad.start_wd = 0.2;
  bad.end_wd = 0.1;
  bad.style = WdIncrStyle::kLinear;
  EXPECT_THROW(bad.validate(), Error);  // Megatron: end_wd >= start_wd
  EXPECT_THROW(parse_wd_incr_style("exponential"), Error);
}

ModelConfig tiny(bool untied) {
  ModelConfig c;
  c.num_layers = 1;
  c.hidden_size = 8;
  c.num_attention_heads = 2;
  c.seq_length = 4;
  c.vocab_size = 10;
  c.make_vocab_size_divisible_by = 4;
  c.untie_embeddings_and_output_weights = untied;
  c.finalize(1);
  return c;
}

// Zero gradients: each AdamW step only decays, p *= 1 - lr x wd_k, with wd_k
// Megatron's for that iteration (and the biases and norms untouched).
TEST(ParamScheduler, OptimizerAppliesTheScheduledWeightDecay) {
  const ModelConfig c = tiny(false);
  ParamRegistry reg(c, StageLayout{0, 1, 0, 1, true, true});
  OptimizerConfig oc;
  oc.weight_decay = 0.5f;  // not used: the schedule gives it
  AdamWOptimizer opt(reg, oc);
  ParamScheduler sched;
  sched.lr.max_lr = 0.1;
  sched.lr.style = LrDecayStyle::kConstant;
  sched.wd = WdSchedule{0.02, 0.3, 4, WdIncrStyle::kCosine};
  std::vector<float> p(size_t(reg.total_floats()), 1.f), g(p.size(), 0.f);
  for (int64_t k = 1; k <= 6; ++k) {
    const std::vector<float> before = p;
    opt.step(p.data(), g.data(), sched.at(double(k - 1)));
    const double wd = megatron_wd(double(k - 1) * 8, 4.0 * 8, 0.02, 0.3, "cosine");
    for (const ParamSpec& s : reg.params()) {
      const double ratio = double(p[size_t(s.offset)]) / before[size_t(s.offset)];
      EXPECT_NEAR(ratio, s.weight_decay ? 1 - 0.1 * wd : 1.0, 1e-6) << s.name << " step " << k;
    }
  }
}

// SGD without momentum or decay: each weight moves by -lr x g exactly, lr the
// decoupled one for the word embedding and the output layer only.
TEST(ParamScheduler, DecoupledLrMovesOnlyEmbeddingAndOutputLayer) {
  for (const bool untied : {false, true}) {
    const ModelConfig c = tiny(untied);
    ParamRegistry reg(c, StageLayout{0, 1, 0, 1, true, true});
    OptimizerConfig oc;
    oc.kind = OptimizerKind::kSgd;
    oc.sgd_momentum = 0.f;
    oc.weight_decay = 0.f;
    AdamWOptimizer opt(reg, oc);
    StepRates rates(0.25);
    rates.decoupled_lr = 0.5;
    rates.weight_decay = 0;
    std::vector<float> p(size_t(reg.total_floats()), 1.f), g(p.size(), 0.5f);
    opt.step(p.data(), g.data(), rates);
    int decoupled = 0;
    for (const ParamSpec& s : reg.params()) {
      const bool expect = s.name == "embedding.word_embeddings.weight" ||
                          s.name == "output_layer.weight";
      EXPECT_EQ(s.embedding_or_output, expect) << s.name;
      decoupled += expect;
      for (int64_t i = 0; i < s.numel(); ++i)
        ASSERT_EQ(p[size_t(s.offset + i)], expect ? 0.75f : 0.875f) << s.name << " " << i;
    }
    EXPECT_EQ(decoupled, untied ? 2 : 1);
  }
}

// --optimizer sgd through the optimizer: torch's SGD (L2 decay on the
// decaying parameters only, momentum, the clip coefficient) in double.
TEST(ParamScheduler, SgdOptimizerMatchesTorchFormulas) {
  const ModelConfig c = tiny(true);
  ParamRegistry reg(c, StageLayout{0, 1, 0, 1, true, true});
  OptimizerConfig oc;
  oc.kind = OptimizerKind::kSgd;
  oc.sgd_momentum = 0.9f;
  oc.weight_decay = 0.1f;
  AdamWOptimizer opt(reg, oc);
  const size_t n = size_t(reg.total_floats());
  std::vector<float> p(n), g(n);
  for (size_t i = 0; i < n; ++i) p[i] = std::sin(0.3 * double(i)), g[i] = std::cos(0.7 * double(i));
  std::vector<double> pd(p.begin(), p.end()), buf(n, 0.0);
  const double lrs[] = {0.1, 0.05, 0.02};
  for (int k = 0; k < 3; ++k) {
    opt.step(p.data(), g.data(), lrs[k], nullptr, 0.5f);
    for (const ParamSpec& s : reg.params())
      for (int64_t i = 0; i < s.numel(); ++i) {
        const size_t j = size_t(s.offset + i);
        const double d = double(g[j]) * 0.5 + (s.weight_decay ? double(0.1f) * pd[j] : 0.0);
        buf[j] = k == 0 ? d : double(0.9f) * buf[j] + d;
        pd[j] -= lrs[k] * buf[j];
      }
  }
  for (const ParamSpec& s : reg.params())
    for (int64_t i = 0; i < s.numel(); ++i) {
      const size_t j = size_t(s.offset + i);
      ASSERT_NEAR(p[j], pd[j], 1e-6 * (1 + std::fabs(pd[j]))) << s.name << " " << i;
      ASSERT_NEAR(opt.exp_avg()[j], buf[j], 1e-6 * (1 + std::fabs(buf[j]))) << s.name;
      ASSERT_EQ(opt.exp_avg_sq()[j], 0.f);
    }
}

}  // namespace param_scheduler_test
}  // namespace mt
