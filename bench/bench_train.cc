// Training-step throughput of megatron.cpp: forward + backward + clip + AdamW
// on random tokens, for the two shapes, at 1 and 2 threads, with the
// matmul peak measured in the same run. One JSON line per (config, threads).
//   config a: 4 layers, 4 heads, hidden 128, seq 64, micro-batch 12, vocab 65
//   config b: GPT-2 small: 12 layers, 12 heads, hidden 768, seq 1024, micro-batch 1, vocab 50304
//   config small: 6 layers, 6 heads, hidden 384, seq 256, micro-batch 8, vocab 50304
//   config llama: GPT-2 small's width as a Llama-style model: 12 layers, hidden 768, 12 heads
//     in 4 query groups, SwiGLU ffn 2048, RMSNorm, RoPE, no biases, untied output, seq 1024,
//     micro-batch 1, vocab 32000
//   config qwen3: llama's shape with Qwen3's attention: head size 128 apart from
//     hidden / heads (--kv-channels: a·d = 2h, as Qwen3-0.6B's 16 x 128 over 1024)
//     and RMSNorms over each head's q and k (--qk-layernorm)
//   config deepseek: llama's width as DeepSeek-V3 is shaped: multi-latent attention
//     (q rank 192, kv rank 64, heads of 64 + 32 RoPE features, values 64; YaRN x4 and
//     the latent norms), the first layer dense (ffn 2048), the others MoE: 16 experts
//     of 512 top-3 in 4 groups (2 chosen) with sigmoid scores, the expert bias and
//     a shared expert of 512 — the dense model's 2048 active ffn per token
// Usage: bench_train [a|b|small|llama|qwen3|deepseek|all] [iters] [--tp N] [--sp] [--pp P] [--m M] [--last-stage-layers K] [--vpp V] [--threads T]
//                    [--bucket FLOATS] [--overlap] [--bf16] [--recompute full|selective] [--zero]
//                    [--shard-grads] [--shard-params]
//                    [--grad-reduce-in-bf16] [--experts E [--topk K] [--ep N] [--alltoall]]
// --bf16: bf16 weights, activations and GEMM operands, fp32 main weights (as `megatron train --bf16`);
// --recompute full: full recompute, uniform groups of one layer;
// --zero: the distributed optimizer (ZeRO-1) over DP; --shard-grads: and the
// gradients (Megatron-FSDP's optim_grads, ZeRO-2; implies --zero); --shard-params:
// and the weights (optim_grads_params, ZeRO-3; implies --shard-grads).
// --experts E: every MLP an MoE of E experts, top-K (default 2), each expert's
// ffn the dense one's / K (the same active parameters and FLOPs per token as
// the dense model), aux loss 0.01; --ep N: experts over N ranks (of DP),
// --alltoall: the all-to-all dispatcher (default all-gather).
// With --pp the iteration runs M micro-batches through the 1F1B schedule and
// the measured bubble (time blocked on neighbours / step time) is reported per
// stage next to the theory (P - 1) / M.
// Under mpirun the world is split TP x DP (DP = world / TP); each DP rank
// trains on its own micro-batch (the global batch grows with DP), rank 0
// prints, adding the layout and the communication time per iteration.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "core/log.h"
#include "comm/mpi_env.h"
#include "comm/parallel_state.h"
#include "kernels/matmul.h"
#include "model/model_runtime.h"
#include "optim/optimizer.h"
#include "optim/staged_grads.h"
#include "pipeline/schedules.h"
#include "observe/metrics.h"
#include "train/train_step.h"

namespace {

struct BenchConfig {
  const char* name;
  int64_t layers, heads, hidden, seq, micro_batch, vocab, iters;
  bool llama = false;
  int64_t query_groups = 0, ffn = 0;  // llama only
  int64_t kv_channels = 0;            // head size (0: hidden / heads)
  bool qk_layernorm = false;
  bool deepseek = false;  // llama's shape as DeepSeek-V3's (the header)
};

struct BenchOptions {
  int64_t iters = 0;  // 0: the config's default
  bool sp = false, overlap = false, zero = false, shard_grads = false, shard_params = false;
  bool grad_reduce_in_bf16 = false;  // with --bf16: the DP gradient reduction moves bf16
  int64_t bucket_floats = 1'000'000;
  int64_t m = 1, last_stage_layers = 0, vpp = 1;
  mt::MathMode math = mt::MathMode::kF32;
  std::string recompute;  // "", "full", "selective"
  int64_t experts = 0, topk = 2;  // MoE (experts 0: dense)
  bool alltoall = false;
};

void run(const BenchConfig& bc, int threads, mt::ParallelState& ps, const BenchOptions& o) {
  const int64_t iters = o.iters > 0 ? o.iters : bc.iters;
  const bool sp = o.sp;
  const int64_t m = o.m, vpp = o.vpp;
  omp_set_num_threads(threads);
  // MFU against the peak of the GEMMs' math (bf16 ~2x fp32 here), measured
  // before and after the timed steps (best of 3 s each) and, in runs of 20
  // or more steps, ~10 times between them (untimed): the highest reading. On
  // a shared machine a burst of other load can cover a short reading and
  // understate the peak (0.25-0.26 TFLOP/s where others read 0.30-0.32, an
  // MFU of 0.87 for an ordinary GPT-2-small step); readings spread over the
  // run leave the burst out. (Short runs get no readings between their
  // steps: each step would follow one.)
  const std::vector<mt::PeakShape> peak_shapes = mt::matmul_peak_shapes(2048);
  const mt::PeakMeasurement before = mt::measure_matmul_peak(peak_shapes, o.math, 3.0);
  double peak = before.flops;
  mt::ModelConfig c;
  c.num_layers = bc.layers;
  c.num_attention_heads = bc.heads;
  c.hidden_size = bc.hidden;
  c.seq_length = bc.seq;
  c.vocab_size = bc.vocab;
  c.hidden_dropout = c.attention_dropout = 0.f;
  if (bc.llama) {
    c.normalization = "RMSNorm";
    c.position_embedding_type = "rope";
    c.swiglu = true;
    c.ffn_hidden_size = bc.ffn;
    c.group_query_attention = true;
    c.num_query_groups = bc.query_groups;
    c.disable_bias_linear = true;
    c.untie_embeddings_and_output_weights = true;
  }
  c.kv_channels = bc.kv_channels;
  c.qk_layernorm = bc.qk_layernorm;
  if (bc.deepseek) {
    c.multi_latent_attention = c.qk_layernorm = true;
    c.group_query_attention = false;
    c.q_lora_rank = 192;
    c.kv_lora_rank = 64;
    c.qk_head_dim = c.v_head_dim = 64;
    c.qk_pos_emb_head_dim = 32;
    c.rotary_scaling_factor = 4.f;
    c.num_experts = 16;
    c.moe_router_topk = 3;
    c.moe_ffn_hidden_size = c.moe_shared_expert_intermediate_size = 512;
    c.moe_layer_freq = "[0]+[1]*" + std::to_string(bc.layers - 1);
    c.moe_router_score_function = "sigmoid";
    c.moe_router_num_groups = 4;
    c.moe_router_group_topk = 2;
    c.moe_router_topk_scaling_factor = 2.5f;
    c.moe_router_enable_expert_bias = true;
    c.moe_aux_loss_coeff = 1e-4f;
    c.moe_router_load_balancing_type = "seq_aux_loss";
    c.moe_token_dispatcher_type = "alltoall";
  }
  if (o.experts > 0) {
    const int64_t ffn = c.ffn_hidden_size > 0 ? c.ffn_hidden_size : 4 * c.hidden_size;
    c.num_experts = o.experts;
    c.moe_router_topk = o.topk;
    c.moe_ffn_hidden_size = ffn / o.topk;
    c.moe_aux_loss_coeff = 0.01f;
    c.moe_token_dispatcher_type = o.alltoall ? "alltoall" : "allgather";
  }
  c.finalize(ps.tp_size);
  const auto [lb, le] =
      mt::stage_layer_range(c.num_layers, ps.pp_size, ps.pp_rank, 0, o.last_stage_layers);
  mt::StageLayout stage{ps.tp_rank, ps.tp_size, lb, le, ps.pp_is_first_stage, ps.pp_is_last_stage};
  if (vpp > 1) stage.chunks = mt::virtual_stage_chunks(c.num_layers, ps.pp_size, ps.pp_rank, vpp);
  stage.ep_rank = ps.ep_rank;
  stage.ep_size = ps.ep_size;
  mt::ParamRegistry reg(c, stage);
  const bool shard_grads = o.shard_grads || o.shard_params;
  mt::GradPlacement grads_at = shard_grads ? mt::plan_staged_grads(reg) : mt::GradPlacement{};
  grads_at.weights = o.shard_params;
  mt::ModelRuntime rt(reg, bc.micro_batch, mt::TensorParallel{&ps.tp_comm, sp},
                      vpp > 1 ? mt::max_in_flight_interleaved(ps.pp_size, ps.pp_rank, int(vpp), m)
                              : mt::max_in_flight_1f1b(ps.pp_size, ps.pp_rank, m),
                      mt::Recompute{o.recompute == "full" ? "uniform" : "", 1}, o.math,
                      mt::ContextParallel{},
                      mt::Device::kCpu, &ps.ep_comm, grads_at);
  mt::GradSync sync(rt, ps, o.bucket_floats, o.overlap, o.zero || shard_grads, false,
                    o.grad_reduce_in_bf16, shard_grads, o.shard_params);
  mt::AdamWOptimizer opt(reg, mt::OptimizerConfig{}, sync.optimizer_ranges(), &ps.dp_comm,
                         o.math == mt::MathMode::kBF16 || o.shard_params, mt::Device::kCpu,
                         &ps.edp_comm, sync.packed_grads(), o.shard_params);
  sync.attach(opt);
  mt::initialize_weights(rt, opt, 1234);
  sync.refresh_params();
  std::mt19937 gen(1 + unsigned(ps.dp_rank));  // the same tokens on every TP rank
  auto next = [&](int64_t, mt::MicroBatchInput& mb) {
    for (int64_t i = 0; i < rt.tokens_per_micro_batch(); ++i) {
      mb.tokens[size_t(i)] = int32_t(gen() % uint32_t(bc.vocab));
      mb.labels[size_t(i)] = int32_t(gen() % uint32_t(bc.vocab));
    }
  };
  const int64_t tokens = bc.seq * bc.micro_batch * ps.dp_size * m;  // per iteration, all DP ranks
  const auto ops = mt::training_schedule(ps.pp_size, ps.pp_rank, int(vpp), m);
  for (int i = 0; i < 2; ++i)  // warm-up
    mt::train_step(rt, opt, sync, ps, ops, i + 1, 1e-4, m, tokens, 1, next);
  ps.world_comm.barrier();
  sync.reset_timers();
  double wait = 0;
  std::vector<double> step_sec;  // each iteration's, for the median
  const int64_t peak_every = iters >= 20 ? iters / 10 : iters;
  double timed = 0;
  for (int64_t i = 0; i < iters; ++i) {
    mt::Timer step;
    wait += mt::train_step(rt, opt, sync, ps, ops, i + 3, 1e-4, m, tokens, 1, next).wait_seconds;
    step_sec.push_back(step.seconds());
    timed += step_sec.back();
    if ((i + 1) % peak_every == 0 && i + 1 < iters) {
      peak = std::max(peak, mt::measure_matmul_peak(peak_shapes, o.math, 0).flops);
      ps.world_comm.barrier();  // every rank back at the same point before the next step
    }
  }
  const double sec = timed / double(iters);
  // The median iteration: on a shared machine a burst of other load lengthens
  // a few iterations, which the mean (ms_per_iter, mfu) keeps and this drops.
  std::nth_element(step_sec.begin(), step_sec.begin() + iters / 2, step_sec.end());
  const double median_sec = step_sec[size_t(iters / 2)];
  const mt::PeakMeasurement after = mt::measure_matmul_peak(peak_shapes, o.math, 3.0);
  peak = std::max(peak, after.flops);
  // The peak product's own median run over its best, in the 3-s readings
  // before and after (their mean): the MFU that product alone would score
  // when timed by its median as the steps are, i.e. how much of a shortfall
  // the machine's noise explains.
  const double peak_median_ratio = 0.5 * (before.median_ratio + after.median_ratio);
  std::vector<float> bubble(size_t(ps.pp_size));
  const float mine = float(wait / double(iters) / sec);
  ps.pp_comm.all_gather(bubble.data(), &mine, 1);
  std::string bubbles = "[";
  for (size_t i = 0; i < bubble.size(); ++i) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%s%.4f", i ? "," : "", bubble[i]);
    bubbles += buf;
  }
  bubbles += "]";
  const double comm_ms = 1e3 * sync.comm_seconds() / double(iters);
  const double flops = mt::flops_per_iteration(c, bc.micro_batch * ps.dp_size * m);
  // Never above 1: an achieved rate above the measured peak becomes the peak
  // (metrics.h; peak_tflops then equals tflops and mfu is 1).
  mt::MfuPeak mfu_peak{peak, peak, "2048 shapes before, between and after", false};
  // The median first: the faster rate, so a peak it raises holds for both.
  const double mfu_median = mt::reported_mfu(flops / median_sec / ps.world_size, mfu_peak);
  const double mfu = mt::reported_mfu(flops / sec / ps.world_size, mfu_peak);
  peak = mfu_peak.flops;
  if (ps.world_rank != 0) return;
  std::printf(
      "{\"bench\":\"train\",\"impl\":\"megatron.cpp\",\"config\":\"%s\",\"layout\":\"%s%s\","
      "\"math\":\"%s\",\"recompute\":\"%s\",\"zero\":%s,\"shard_grads\":%s,"
      "\"shard_params\":%s,"
      "\"ranks\":%d,\"threads\":%d,\"comm_ms_per_iter\":%.2f,\"micro_batches\":%lld,"
      "\"bubble_per_stage\":%s,\"bubble_theory\":%.4f,"
      "\"layers\":%lld,\"hidden\":%lld,\"heads\":%lld,\"seq\":%lld,\"micro_batch\":%lld,"
      "\"vocab\":%lld,\"iters\":%lld,\"ms_per_iter\":%.2f,\"tokens_per_s\":%.1f,"
      "\"tflops\":%.4f,\"peak_tflops\":%.4f,\"mfu\":%.4f,\"ms_per_iter_median\":%.2f,"
      "\"mfu_median\":%.4f,\"peak_median_ratio\":%.4f,\"experts\":%lld,\"topk\":%lld,"
      "\"ep\":%d,\"dispatcher\":\"%s\"}\n",
      bc.name, ps.layout().c_str(), sp ? "-SP" : "", mt::math_mode_name(o.math),
      o.recompute.c_str(), o.zero || shard_grads ? "true" : "false",
      shard_grads ? "true" : "false", o.shard_params ? "true" : "false", ps.world_size, threads,
      comm_ms,
      (long long)m, bubbles.c_str(), double(ps.pp_size - 1) / double(vpp * m),
      (long long)bc.layers, (long long)bc.hidden, (long long)bc.heads,
      (long long)bc.seq, (long long)bc.micro_batch, (long long)bc.vocab, (long long)iters,
      sec * 1e3, double(tokens) / sec, flops / sec / 1e12 / ps.world_size, peak / 1e12, mfu,
      median_sec * 1e3, mfu_median, peak_median_ratio,
      (long long)c.num_experts, (long long)(c.moe() ? c.moe_router_topk : 0), ps.ep_size,
      c.moe() ? c.moe_token_dispatcher_type.c_str() : "");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string which = "all";
  int tp = 1, pp = 1, threads = 0;
  BenchOptions o;
  CLI::App app{"Training-step throughput (forward + backward + clip + AdamW on random tokens), "
               "one JSON line per (config, threads); under mpirun TP x DP (DP = world / TP)",
               "bench_train"};
  app.add_option("config", which, "a | b | small | llama | qwen3 | all (default all)")
      ->check(CLI::IsMember({"a", "b", "small", "llama", "qwen3", "deepseek", "all"}));
  app.add_option("iters", o.iters, "timed iterations (default: the config's)")
      ->check(at_least(1));
  app.add_option("--tp", tp, "tensor-parallel size")->check(at_least(1));
  app.add_option("--pp", pp, "pipeline-parallel size (1F1B over --m micro-batches)")
      ->check(at_least(1));
  app.add_option("--m", o.m, "micro-batches per iteration")->check(at_least(1));
  app.add_option("--last-stage-layers", o.last_stage_layers,
                 "layers on the last pipeline stage (default: even split)")
      ->check(at_least(0));
  app.add_option("--vpp", o.vpp, "model chunks per pipeline rank (interleaved 1F1B)")
      ->check(at_least(1));
  app.add_flag("--sp", o.sp, "sequence parallelism (with --tp)");
  app.add_flag("--overlap", o.overlap, "overlap the DP gradient reduction with backward");
  app.add_flag("--zero", o.zero, "the distributed optimizer (ZeRO-1) over DP");
  app.add_flag("--shard-grads", o.shard_grads,
               "and the gradients (Megatron-FSDP's optim_grads, ZeRO-2); implies --zero");
  app.add_flag("--shard-params", o.shard_params,
               "and the weights (optim_grads_params, ZeRO-3); implies --shard-grads");
  bool bf16 = false;
  app.add_flag("--bf16", bf16, "bf16 weights, activations and GEMM operands");
  app.add_flag("--grad-reduce-in-bf16", o.grad_reduce_in_bf16,
               "with --bf16: the DP gradient reduction moves bf16");
  app.add_option("--recompute", o.recompute, "activation recompute: full | selective")
      ->check(CLI::IsMember({"full", "selective"}));
  app.add_option("--bucket", o.bucket_floats, "DP gradient bucket size in floats")
      ->check(at_least(1));
  int ep = 1;
  app.add_option("--experts", o.experts, "MoE: experts per layer (each ffn / topk)")
      ->check(at_least(1));
  app.add_option("--topk", o.topk, "MoE: experts per token")->check(at_least(1));
  app.add_option("--ep", ep, "MoE: expert-parallel size (of the DP ranks)")->check(at_least(1));
  app.add_flag("--alltoall", o.alltoall, "MoE: the all-to-all dispatcher");
  app.add_option("--threads", threads, "OpenMP threads (default: 1 and 2)")
      ->check(at_least(0));
  if (const int rc = parse_bench_args(app, argc, argv); rc >= 0) return rc;
  if (bf16) o.math = mt::MathMode::kBF16;
  return run_bench([&] {
    mt::MpiEnv mpi(&argc, &argv);
    mt::ParallelConfig pc;
    pc.tp = tp;
    pc.pp = pp;
    pc.ep = ep;
    mt::ParallelState ps(pc);
    const BenchConfig a{"a", 4, 4, 128, 64, 12, 65, 200};
    const BenchConfig b{"b", 12, 12, 768, 1024, 1, 50304, 5};
    const BenchConfig llama{"llama", 12, 12, 768, 1024, 1, 32000, 5, true, 4, 2048};
    const BenchConfig qwen3{"qwen3", 12, 12, 768, 1024, 1, 32000, 5, true, 4, 2048, 128, true};
    const BenchConfig small{"small", 6, 6, 384, 256, 8, 50304, 10};
    const BenchConfig deepseek = [&] {
      BenchConfig d = llama;
      d.name = "deepseek";
      d.deepseek = true;
      return d;
    }();
    for (const BenchConfig* bc : {&a, &b, &llama, &qwen3, &small, &deepseek}) {
      if (which != "all" && which != bc->name) continue;
      if (threads > 0) {
        run(*bc, threads, ps, o);
      } else {
        for (int t : {1, 2}) run(*bc, t, ps, o);
      }
    }
    return 0;
  });
}
