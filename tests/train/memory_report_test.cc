// The memory report's closed-form prediction: Megatron's bytes-per-parameter
// table (with our documented bf16 deviation), activation scaling with s·b,
// in-flight records, TP + SP and full recompute, agreement with what the
// model's carve functions really plan, and the report's text and JSON.
#include "memory/memory_report.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "core/arena.h"
#include "core/error.h"
#include "model/gpt.h"

namespace mt {
namespace memory_report_test {

// GPT-2 small on one rank: s=1024, b=1, h=768, 12 heads, f=3072, v=50304, 12 layers.
MemoryPlan gpt2_small() {
  MemoryPlan p;
  p.params_local = 124439808;
  p.s = 1024, p.b = 1, p.h = 768;
  p.a_local = 12, p.f_local = 3072, p.v_local = 50304;
  p.layers = 12;
  return p;
}

TEST(MemoryReport, BytesPerParameterFollowMegatronsTable) {
  MemoryPlan p = gpt2_small();
  p.params_local = 1000003;  // not divisible by d: the formula is per parameter
  for (int64_t d : {1, 2, 4, 8}) {
    p.dp = d;
    p.math = "fp32";
    p.distributed_optimizer = false;
    EXPECT_DOUBLE_EQ(bytes_per_param(p), 16.0) << "fp32, d=" << d;
    p.distributed_optimizer = true;
    EXPECT_DOUBLE_EQ(bytes_per_param(p), 8.0 + 8.0 / double(d)) << "fp32 distributed, d=" << d;
    p.math = "bf16";  // Megatron's: bf16 weights, fp32 grads, fp32 main weights + m + v
    p.distributed_optimizer = false;
    EXPECT_DOUBLE_EQ(bytes_per_param(p), 18.0) << "bf16, d=" << d;
    p.distributed_optimizer = true;
    EXPECT_DOUBLE_EQ(bytes_per_param(p), 6.0 + 12.0 / double(d)) << "bf16 distributed, d=" << d;
    p.math = "fp16";  // emulated: fp32 weights, no 16-bit copy
    EXPECT_DOUBLE_EQ(bytes_per_param(p), 8.0 + 8.0 / double(d)) << "fp16 distributed, d=" << d;
  }
  p.math = "bf16";
  p.dp = 4;
  const MemoryClasses m = predict_memory(p);
  EXPECT_DOUBLE_EQ(m.params, 2.0 * 1000003);
  EXPECT_DOUBLE_EQ(m.grads, 4.0 * 1000003);
  EXPECT_DOUBLE_EQ(m.optimizer, 3.0 * 1000003);
}

TEST(MemoryReport, ActivationsScaleLinearlyWithTokensAndRecords) {
  const MemoryPlan p = gpt2_small();
  const double base = predict_memory(p).activations;
  ASSERT_GT(base, 0.0);
  MemoryPlan q = p;
  q.b = 3;
  EXPECT_DOUBLE_EQ(predict_memory(q).activations, 3 * base);
  q = p;
  q.s = 512;
  EXPECT_DOUBLE_EQ(predict_memory(q).activations, 0.5 * base);
  q.b = 2;  // s·b back to 1024
  EXPECT_DOUBLE_EQ(predict_memory(q).activations, base);
  q = p;
  q.in_flight = 4;
  EXPECT_DOUBLE_EQ(predict_memory(q).activations, 4 * base);
  EXPECT_DOUBLE_EQ(predict_memory(q).workspace, predict_memory(p).workspace);  // shared scratch
  // Two chunks of 6 layers: one more residual boundary and ids, same layers.
  q = p;
  q.chunks = 2;
  const double n = 1024.0, h = 768.0;
  EXPECT_DOUBLE_EQ(predict_memory(q).activations, base + 4 * (n * h + 3 * n));
}

// Activation bytes of one layer: the difference made by adding a layer.
double per_layer_bytes(MemoryPlan p) {
  p.layers = 1;
  const double one = predict_memory(p).activations;
  p.layers = 2;
  return predict_memory(p).activations - one;
}

TEST(MemoryReport, PerLayerBytesMatchTheKorthikantiMapping) {
  // 17 sbh fp32 values per layer with its input (Korthikanti: 16 sbh 16-bit
  // values + 2 sbh mask bytes + 5as²b), plus the norm statistics and lse.
  const MemoryPlan p = gpt2_small();
  const double sb = 1024.0, h = 768.0, a = 12.0;
  EXPECT_DOUBLE_EQ(per_layer_bytes(p), 4 * (17 * sb * h + (4 + a) * sb));
}

TEST(MemoryReport, TensorAndSequenceParallelDivideLayerBytesByT) {
  const MemoryPlan p = gpt2_small();
  const double one_rank = per_layer_bytes(p);
  for (int64_t t : {2, 4}) {
    MemoryPlan q = p;
    q.tp = t;
    q.a_local = 12 / t, q.f_local = 3072 / t, q.v_local = 50304 / t;
    q.sequence_parallel = true;
    EXPECT_DOUBLE_EQ(per_layer_bytes(q), one_rank / double(t)) << "t=" << t;
    q.sequence_parallel = false;  // TP alone leaves the residual-stream tensors whole
    EXPECT_GT(per_layer_bytes(q), 1.2 * one_rank / double(t)) << "t=" << t;
    EXPECT_LT(per_layer_bytes(q), one_rank) << "t=" << t;
  }
}

TEST(MemoryReport, FullRecomputeKeepsUnderFifteenPercentForGpt2Small) {
  const MemoryPlan p = gpt2_small();
  MemoryPlan r = p;
  r.recompute_layers_kept = 0;  // --recompute-method uniform --recompute-num-layers 1
  r.recompute_group_size = 1;
  const double full = predict_memory(p).activations, kept = predict_memory(r).activations;
  EXPECT_LT(kept, 0.15 * full) << kept << " of " << full;
  EXPECT_GT(kept, 0.10 * full) << "the boundaries and one scratch layer must remain";
  // block: recompute 4 layers one at a time, keep 8.
  r.recompute_layers_kept = 8;
  const double block = predict_memory(r).activations;
  EXPECT_DOUBLE_EQ(full - block, 3 * per_layer_bytes(p) - 3 * 4 * 1024.0 * 768.0);
}

TEST(MemoryReport, RejectsInconsistentPlans) {
  MemoryPlan p = gpt2_small();
  p.math = "fp8";
  EXPECT_THROW(predict_memory(p), Error);
  p = gpt2_small();
  p.chunks = 5;  // 12 layers
  EXPECT_THROW(predict_memory(p), Error);
  p = gpt2_small();
  p.recompute_layers_kept = 4;  // recompute without a group size
  EXPECT_THROW(predict_memory(p), Error);
  p = gpt2_small();
  p.tp = 5, p.sequence_parallel = true;  // 768 / 5
  EXPECT_THROW(predict_memory(p), Error);
}

// The prediction against what gpt.cc's carve functions plan (a counting
// Arena), for hand-made shapes: equal up to the 64-byte alignment per tensor.
struct Carved {
  double activations, workspace;
};

Carved carve(const GptShapes& sh, int64_t in_flight) {
  Arena act, ws;
  for (int64_t i = 0; i < in_flight; ++i) carve_activations(act, sh);
  carve_workspace(ws, sh);
  return {double(act.used()), double(ws.used())};
}

// llama: RMSNorm, SwiGLU and 2 query groups for the 4 heads; qwen: llama's
// with head size 24 (--kv-channels; a·d = 96 against h = 64) and the q/k
// norms (--qk-layernorm).
GptShapes tiny_shapes(int64_t tp, bool sp, bool has_output, bool llama = false,
                      bool qwen = false) {
  GptShapes sh;
  sh.s = 96, sh.b = 2, sh.h = 64;
  sh.s_local = sp ? sh.s / tp : sh.s;
  sh.a = 4 / tp, sh.d = qwen ? 24 : 16;
  sh.qk_layernorm = qwen;
  sh.g = llama ? 2 / tp : sh.a;
  sh.f = 256 / tp, sh.v = 128 / tp;
  sh.rms_norm = sh.swiglu = llama;
  sh.f_in = llama ? 2 * sh.f : sh.f;
  sh.num_layers = 3;
  sh.has_output = has_output;
  return sh;
}

MemoryPlan plan_of(const GptShapes& sh, int64_t tp, bool sp, int64_t in_flight) {
  MemoryPlan p;
  p.s = sh.s, p.b = sh.b, p.h = sh.h;
  p.a_local = sh.a, p.g_local = sh.g, p.f_local = sh.f, p.v_local = sh.v;
  p.swiglu = sh.swiglu, p.rms_norm = sh.rms_norm;
  p.head_dim = sh.d, p.qk_layernorm = sh.qk_layernorm;
  p.tp = tp, p.sequence_parallel = sp;
  p.layers = sh.num_layers, p.in_flight = in_flight;
  p.has_output = sh.has_output;
  return p;
}

TEST(MemoryReport, AgreesWithWhatTheModelCarves) {
  struct Case {
    int64_t tp;
    bool sp, has_output;
    const char* method;
    int64_t recompute_layers, kept, group, in_flight;
    bool llama = false, qwen = false;
  };
  const Case cases[] = {
      {1, false, true, "", 0, -1, 0, 1},     {2, true, true, "", 0, -1, 0, 2},
      {2, false, false, "", 0, -1, 0, 3},    {1, false, true, "uniform", 2, 0, 2, 1},
      {2, true, true, "block", 1, 2, 1, 2},  {4, true, false, "uniform", 1, 0, 1, 1},
      {1, false, true, "", 0, -1, 0, 1, true}, {2, true, true, "", 0, -1, 0, 2, true},
      {2, false, false, "uniform", 1, 0, 1, 1, true},
      {1, false, true, "", 0, -1, 0, 1, true, true}, {2, true, true, "", 0, -1, 0, 2, true, true},
      {2, false, false, "uniform", 1, 0, 1, 1, true, true},
  };
  for (const Case& c : cases)
    for (MathMode math : {MathMode::kF32, MathMode::kBF16}) {  // bf16: bf16 records
    GptShapes sh = tiny_shapes(c.tp, c.sp, c.has_output, c.llama, c.qwen);
    sh.cm.math = math;
    sh.recompute_group.assign(size_t(sh.num_layers), -1);
    set_full_recompute(sh, c.method, c.recompute_layers);
    MemoryPlan p = plan_of(sh, c.tp, c.sp, c.in_flight);
    p.math = math_mode_name(math);
    p.recompute_layers_kept = c.kept;
    p.recompute_group_size = c.group;
    const MemoryClasses m = predict_memory(p);
    const Carved got = carve(sh, c.in_flight);
    const std::string what = std::string(math_mode_name(math)) +
                             (c.qwen ? " qwen " : c.llama ? " llama " : " ") +
                             "tp " + std::to_string(c.tp) + (c.sp ? " sp" : "") +
                             (c.has_output ? " output" : "") + " recompute '" + c.method + "'";
    // Each carved tensor rounds up to 64 bytes (at most 54 tensors a record here).
    EXPECT_GE(got.activations, m.activations) << what;
    EXPECT_LE(got.activations, m.activations + 64.0 * 70 * double(c.in_flight)) << what;
    EXPECT_GE(got.workspace, m.workspace) << what;
    EXPECT_LE(got.workspace, m.workspace + 64.0 * 20) << what;
  }
}

TEST(MemoryReport, FormatsEveryClassWithRatios) {
  MemoryClasses pred{2e6, 2e6, 4e6, 10e6, 1e6};
  MemoryClasses meas{2e6, 2.1e6, 4e6, 15e6, 0};
  pred.workspace = 0;  // a class predicted empty prints "-" as its ratio
  const std::string s = format_memory_report(pred, meas, size_t(123456789));
  for (const char* word : {"params", "grads", "optimizer", "activations", "workspace", "total",
                           "peak RSS", "1.050", "1.500", "123.46", "23.10"})
    EXPECT_NE(s.find(word), std::string::npos) << "missing '" << word << "' in\n" << s;
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 8) << s;
  const nlohmann::json j = memory_report_json(pred, meas, 42);
  EXPECT_DOUBLE_EQ(j["activations"]["predicted_bytes"].get<double>(), 10e6);
  EXPECT_DOUBLE_EQ(j["grads"]["measured_bytes"].get<double>(), 2.1e6);
  EXPECT_DOUBLE_EQ(j["activations"]["ratio"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(j["total"]["predicted_bytes"].get<double>(), 18e6);
  EXPECT_TRUE(j["workspace"]["ratio"].is_null());
  EXPECT_EQ(j["peak_rss_bytes"].get<size_t>(), 42u);
}

TEST(MemoryReport, AsyncSaveCopyIsALineOfItsOwnOnlyWhenThere) {
  MemoryClasses pred{2e6, 2e6, 4e6, 10e6, 1e6}, meas = pred;
  pred.async_save = 6e6;
  meas.async_save = 6e6;
  const std::string s = format_memory_report(pred, meas, size_t(1));
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 9) << s;
  EXPECT_NE(s.find("  async save copy           6.00        6.00   1.000"), std::string::npos) << s;
  const nlohmann::json j = memory_report_json(pred, meas, 1);
  EXPECT_DOUBLE_EQ(j["async_save"]["measured_bytes"].get<double>(), 6e6);
  EXPECT_DOUBLE_EQ(j["total"]["predicted_bytes"].get<double>(), 25e6);
  // The formula: the weights as held (bf16: 2 bytes) plus the optimizer class.
  EXPECT_DOUBLE_EQ(async_save_copy_bytes(1000, 2, 12000, true), 14000);
  EXPECT_DOUBLE_EQ(async_save_copy_bytes(1000, 4, 8000, false), 4000);
}

// The MTP depths (model/mtp.h) on the last stage: their records and scratch
// by the formula, against what the model carves.
TEST(MemoryReport, MtpDepthsAgreeWithWhatTheModelCarves) {
  for (int64_t depths : {1, 2})
    for (bool llama : {false, true})
      for (MathMode math : {MathMode::kF32, MathMode::kBF16}) {
        GptShapes sh = tiny_shapes(1, false, true, llama);
        sh.cm.math = math;
        sh.mtp_depths = depths;
        MemoryPlan p = plan_of(sh, 1, false, 2);
        p.math = math_mode_name(math);
        p.mtp_depths = depths;
        const MemoryClasses with = predict_memory(p);
        p.mtp_depths = 0;
        const MemoryClasses without = predict_memory(p);
        const Carved got = carve(sh, 2);
        const std::string what = std::string(math_mode_name(math)) + (llama ? " llama" : "") +
                                 " depths " + std::to_string(depths);
        EXPECT_GT(with.activations, without.activations) << what;
        EXPECT_GE(got.activations, with.activations) << what;
        EXPECT_LE(got.activations, with.activations + 64.0 * (70 + 40 * depths) * 2) << what;
        EXPECT_GE(got.workspace, with.workspace) << what;
        EXPECT_LE(got.workspace, with.workspace + 64.0 * 26) << what;
      }
}

}  // namespace memory_report_test
}  // namespace mt
