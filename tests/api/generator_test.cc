// megatron::Generator (include/megatron/decoding.h), `megatron generate` as a
// library call, at 1 rank and under `mpirun -n 2` (TP2): the tokens it streams
// for a seed are DecodingSession::generate's for that seed and prompt (serve's
// engine, another decoder), the streamed texts add up to the completion, and
// past the context the window slides and the stream goes on. Its words parse
// as the binary's: --help is a FlagHelp with generate's usage, a misspelt flag
// a FlagError naming the nearest, and the values reach the options.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "decoding_checkpoint.h"
#include "megatron/decoding.h"

namespace mt::test {
namespace generator_test {

megatron::GenerateOptions options(const std::string& prompt, int64_t n, uint64_t seed) {
  megatron::GenerateOptions o;
  o.load = decoding_checkpoint();
  o.prompt = prompt;
  o.max_new_tokens = n;
  o.temperature = 0.8;
  o.top_k = 20;
  o.seed = seed;
  o.tensor_parallel = world_size();
  return o;
}

TEST(Generator, StreamsDecodingSessionsTokensForTheSameSeed) {
  const std::string prompt = "the cat sees a dog";
  const int64_t n = 12;  // 18 + 12 within the context of 32
  std::vector<megatron::GeneratedToken> streamed;
  megatron::Generator gen(options(prompt, n, 7));
  const megatron::Generation g =
      gen.generate([&](const megatron::GeneratedToken& t) { streamed.push_back(t); });
  ASSERT_EQ(streamed.size(), size_t(n));
  ASSERT_EQ(g.tokens.size(), size_t(n));
  std::string text;
  for (size_t i = 0; i < streamed.size(); ++i) {
    EXPECT_EQ(streamed[i].index, int64_t(i));
    EXPECT_EQ(streamed[i].id, g.tokens[i]) << i;
    EXPECT_EQ(streamed[i].log_prob, g.log_probs[i]) << i;
    EXPECT_LE(g.log_probs[i], 0.0) << i;
    text += streamed[i].text;
  }
  EXPECT_EQ(text, g.text);  // one character per token: each comes with its token
  EXPECT_EQ(g.prompt_tokens.size(), prompt.size());
  EXPECT_FALSE(g.prompt_truncated);
  EXPECT_FALSE(g.context_slid);

  megatron::DecodingOptions d;
  d.load = decoding_checkpoint();
  d.tensor_parallel = world_size();
  megatron::DecodingSession session(d);
  megatron::Sampling s;
  s.max_tokens = n;
  s.temperature = 0.8;
  s.top_k = 20;
  s.seed = 7;  // prompt 0 samples as generate --seed 7
  const std::vector<megatron::Completion> c = session.generate({prompt}, s);
  if (world_rank() != 0) return;  // the completions are rank 0's
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].prompt_tokens, g.prompt_tokens);
  EXPECT_EQ(c[0].tokens, g.tokens);
  ASSERT_EQ(c[0].log_probs.size(), g.log_probs.size());
  for (size_t i = 0; i < g.log_probs.size(); ++i)
    EXPECT_NEAR(c[0].log_probs[i], g.log_probs[i], 1e-5) << i;
  EXPECT_EQ(c[0].text, g.text);
}

// Past the context the window restarts on its last half and the stream goes
// on; a prompt longer than the context is cut to its end.
TEST(Generator, PastTheContextTheWindowSlidesAndTheStreamGoesOn) {
  std::string prompt;
  while (prompt.size() < size_t(kDecodingContext) + 8) prompt += "a dog likes the river. ";
  const int64_t n = kDecodingContext + 4;
  int64_t count = 0;
  megatron::Generator gen(options(prompt, n, 3));
  const megatron::Generation g = gen.generate([&](const megatron::GeneratedToken&) { ++count; });
  EXPECT_EQ(count, n);
  EXPECT_EQ(g.tokens.size(), size_t(n));
  EXPECT_TRUE(g.prompt_truncated);
  EXPECT_TRUE(g.context_slid);
  EXPECT_EQ(g.prompt_tokens.size(), size_t(kDecodingContext));
  EXPECT_THROW(gen.generate(), std::logic_error);  // once
}

TEST(GeneratorOptions, OutOfRangeIsRefusedNamingTheFlag) {
  megatron::GenerateOptions o;
  o.load = "ckpt";
  o.max_new_tokens = -5;
  try {
    megatron::Generator g(o);
    FAIL() << "max_new_tokens -5 did not throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--max-new-tokens -5 must be >= 0"), std::string::npos)
        << e.what();
  }
  o.max_new_tokens = 1;
  o.top_p = 1.5;
  EXPECT_THROW(megatron::Generator{o}, std::invalid_argument);
}

TEST(GeneratorWords, HelpIsAFlagHelpWithTheGenerateUsage) {
  try {
    megatron::Generator g(std::vector<std::string>{"--help"});
    FAIL() << "--help did not throw";
  } catch (const megatron::FlagHelp& h) {
    const std::string usage = h.what();
    EXPECT_EQ(usage.rfind("generate text from a checkpoint\nUsage: generate [OPTIONS]\n", 0), 0u)
        << usage;
    EXPECT_NE(usage.find("it restarts on its last half"), std::string::npos) << usage;
  }
}

TEST(GeneratorWords, AnUnknownFlagIsAFlagErrorNamingIt) {
  try {
    megatron::Generator g(std::vector<std::string>{"--load", "ckpt", "--max-new-token", "3"});
    FAIL() << "--max-new-token did not throw";
  } catch (const megatron::FlagHelp& h) {
    FAIL() << "a FlagHelp: " << h.what();
  } catch (const megatron::FlagError& e) {
    EXPECT_EQ(std::string(e.what()),
              "unknown flag --max-new-token; the nearest flag of `megatron generate` is "
              "--max-new-tokens; see `megatron generate --help`");
  }
  EXPECT_THROW(megatron::Generator(std::vector<std::string>{"--prompt", "hi"}),
               megatron::FlagError);  // --load is required
}

TEST(GeneratorWords, TheFlagsBecomeTheOptions) {
  const megatron::Generator g(std::vector<std::string>{
      "--load", "ckpt", "--prompt", "Once", "--max-new-tokens", "9", "--temperature", "0.5",
      "--top-k", "4", "--top-p", "0.9", "--seed", "11", "--tensor-model-parallel-size", "2"});
  const megatron::GenerateOptions& o = g.options();
  EXPECT_EQ(o.load, "ckpt");
  EXPECT_EQ(o.prompt, "Once");
  EXPECT_EQ(o.max_new_tokens, 9);
  EXPECT_EQ(o.temperature, 0.5);
  EXPECT_EQ(o.top_k, 4);
  EXPECT_EQ(float(o.top_p), 0.9f);  // parsed as the sampler's float
  EXPECT_EQ(o.seed, 11u);
  EXPECT_EQ(o.tensor_parallel, 2);
  EXPECT_EQ(o.expert_parallel, 1);
}

}  // namespace generator_test
}  // namespace mt::test
