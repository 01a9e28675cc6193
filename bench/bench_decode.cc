// Continuous-batching decode throughput (model/batched_decoder.h): N
// sequences of a small Llama-shaped model (RoPE, GQA, SwiGLU, RMSNorm; random
// weights) prefilled in chunks, then stepping together, one new token each
// per step (greedy), for N = 1, 4, 16 by default. One JSON line per N with the
// decode tokens/s, then one with each N's speed-up over N = 1, which is the
// rate of serving the requests one after another (the serving issue wants 16
// concurrent requests >= 4x faster than one after another).
// Usage: bench_decode [--sequences 1,4,16] [--new-tokens 48] [--prompt 32]
//                     [--layers 4] [--hidden 512] [--threads T]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <vector>

#include "bench_cli.h"
#include "model/batched_decoder.h"

namespace {

struct DecodeBench {
  std::vector<int64_t> sequences = {1, 4, 16};
  int64_t new_tokens = 48, prompt = 32, layers = 4, hidden = 512, block_size = 16;
  int threads = 0;  // 0: OpenMP's default
};

mt::ModelConfig llama_config(const DecodeBench& b) {
  mt::ModelConfig c;
  c.num_layers = b.layers;
  c.hidden_size = b.hidden;
  c.num_attention_heads = b.hidden / 64;
  c.group_query_attention = true;
  c.num_query_groups = std::max<int64_t>(1, c.num_attention_heads / 4);
  c.ffn_hidden_size = b.hidden * 11 / 4;
  c.seq_length = 1024;
  c.max_position_embeddings = 1024;
  c.vocab_size = 8000;
  c.normalization = "RMSNorm";
  c.position_embedding_type = "rope";
  c.swiglu = true;
  c.disable_bias_linear = true;
  c.untie_embeddings_and_output_weights = true;
  c.init_method_std = 0.02f;
  c.finalize(1);
  return c;
}

int32_t argmax(const float* logits, int64_t vocab) {
  return int32_t(std::max_element(logits, logits + vocab) - logits);
}

// Decode tokens/s of n sequences stepping together (prefill not timed).
double tokens_per_s(const mt::ParamRegistry& reg, const float* params, const DecodeBench& b,
                    int64_t n) {
  mt::BatchedDecoderOptions opt;
  opt.block_size = b.block_size;
  opt.max_sequences = n;
  opt.tokens = n * (b.prompt + b.new_tokens);
  opt.max_rows = std::max<int64_t>(n, b.block_size);
  mt::BatchedDecoder dec(reg, params, opt);
  const int64_t vocab = dec.vocab_size(), v = dec.vocab_rows();
  std::vector<int64_t> seqs;
  std::vector<int32_t> next(static_cast<size_t>(n));
  for (int64_t s = 0; s < n; ++s) {  // prefill: chunks of a block's rows
    seqs.push_back(*dec.add_sequence(b.prompt + b.new_tokens));
    for (int64_t p = 0; p < b.prompt; p += b.block_size) {
      std::vector<mt::DecodeToken> rows;
      for (int64_t i = p; i < std::min(b.prompt, p + b.block_size); ++i)
        rows.push_back({seqs.back(), int32_t((s * 131 + i * 17) % vocab)});
      const mt::DecodeStep out = dec.step(rows);
      next[size_t(s)] = argmax(out.logits + int64_t(rows.size() - 1) * v, vocab);
    }
  }
  std::vector<mt::DecodeToken> rows(static_cast<size_t>(n));
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t t = 0; t < b.new_tokens; ++t) {
    for (int64_t s = 0; s < n; ++s) rows[size_t(s)] = {seqs[size_t(s)], next[size_t(s)]};
    const mt::DecodeStep out = dec.step(rows);
    for (int64_t s = 0; s < n; ++s) next[size_t(s)] = argmax(out.logits + s * v, vocab);
  }
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return double(n * b.new_tokens) / sec;
}

}  // namespace

int main(int argc, char** argv) {
  DecodeBench b;
  CLI::App app{"Batched decode tokens/s of N sequences stepping together on a small Llama-shaped "
               "model, and each N's speed-up over one sequence: one JSON line each",
               "bench_decode"};
  app.add_option("--sequences", b.sequences, "the N to measure")->delimiter(',')
      ->check(at_least(1));
  app.add_option("--new-tokens", b.new_tokens, "tokens each sequence decodes (timed)")
      ->check(at_least(1));
  app.add_option("--prompt", b.prompt, "prompt tokens of each sequence (prefilled, not timed)")
      ->check(at_least(1));
  app.add_option("--layers", b.layers, "transformer layers")->check(at_least(1));
  app.add_option("--hidden", b.hidden, "hidden size (a multiple of 256: heads of 64, 4 per group)")
      ->check(at_least(256));
  app.add_option("--threads", b.threads, "OpenMP threads (default: OpenMP's)")->check(at_least(1));
  if (const int rc = parse_bench_args(app, argc, argv); rc >= 0) return rc;
  return run_bench([&] {
    MT_CHECK(b.hidden % 256 == 0, "--hidden ", b.hidden, " is not a multiple of 256; fix: 512");
    MT_CHECK(b.prompt + b.new_tokens <= 1024, "--prompt plus --new-tokens is ", b.prompt + b.new_tokens,
             "; the bench model's context is 1024");
    if (b.threads > 0) omp_set_num_threads(b.threads);
    const mt::ModelConfig c = llama_config(b);
    const mt::ParamRegistry reg(c, mt::StageLayout{0, 1, 0, c.num_layers, true, true});
    std::vector<float> params(size_t(reg.total_floats()));
    reg.initialize(params.data(), 1);
    std::map<int64_t, double> rate;
    for (int64_t n : b.sequences) {
      tokens_per_s(reg, params.data(), b, n);  // warm-up: the GEMM primitives of this N
      rate[n] = tokens_per_s(reg, params.data(), b, n);
      std::printf("{\"bench\":\"decode\",\"config\":\"llama\",\"layers\":%lld,\"hidden\":%lld,"
                  "\"params\":%lld,\"threads\":%d,\"sequences\":%lld,\"prompt\":%lld,"
                  "\"new_tokens\":%lld,\"tokens_per_s\":%.1f}\n",
                  (long long)b.layers, (long long)b.hidden, (long long)reg.total_floats(),
                  omp_get_max_threads(), (long long)n, (long long)b.prompt,
                  (long long)b.new_tokens, rate[n]);
      std::fflush(stdout);
    }
    if (rate.count(1)) {
      std::printf("{\"bench\":\"decode\",\"speedup_over_one\":{");
      const char* sep = "";
      for (auto [n, r] : rate) std::printf("%s\"%lld\":%.2f", sep, (long long)n, r / rate[1]), sep = ",";
      std::printf("}}\n");
    }
    return 0;
  });
}
