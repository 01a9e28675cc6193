// The serving engine (serve/engine.h) on one rank: requests submitted
// together, decoded in shared steps with chunked prefill, each get what they
// get alone through a GptDecoder (greedy tokens, log-probabilities); stop
// tokens, max_tokens 0, cancellation and the bounded queue (which admits
// one submission larger than itself when nothing else waits).
#include <gtest/gtest.h>

#include <thread>

#include "../model/decoder_test_util.h"
#include "model/sampling.h"
#include "serve/engine.h"

namespace mt::serve {
namespace engine_test {

struct Tiny {
  ModelConfig cfg;
  ParamRegistry reg;
  std::vector<float> params;
  explicit Tiny(ModelConfig c)
      : cfg((c.finalize(1), c)), reg(cfg, StageLayout{0, 1, 0, cfg.num_layers, true, true}),
        params(decoder_test_params(reg)) {}
};

// Greedy decoding of `prompt` alone: the new tokens, their and the prompt's log-probabilities.
struct Alone {
  std::vector<int32_t> tokens;
  std::vector<double> logprobs, prompt_logprobs;
};
Alone greedy_alone(const Tiny& m, const std::vector<int32_t>& prompt, int64_t n) {
  GptDecoder dec(m.reg, m.params.data());
  Alone a;
  const float* l = nullptr;
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (l) a.prompt_logprobs.push_back(log_prob(l, m.cfg.vocab_size, prompt[i]));
    l = dec.step(prompt[i]);
  }
  for (int64_t i = 0; i < n; ++i) {
    const int32_t t = int32_t(std::max_element(l, l + m.cfg.vocab_size) - l);
    a.tokens.push_back(t);
    a.logprobs.push_back(log_prob(l, m.cfg.vocab_size, t));
    l = dec.step(t);
  }
  return a;
}

BatchedDecoderOptions small_steps() {
  BatchedDecoderOptions o;
  o.tokens = 96;
  o.block_size = 4;
  o.max_sequences = 3;  // 6 requests: half wait for room
  o.max_rows = 5;       // prompts of 9..13 tokens: prefill in chunks, beside decode rows
  o.max_positions = 24;
  return o;
}

StreamSnapshot wait_done(RequestStream& r) {
  StreamSnapshot s;
  do s = r.wait(0, std::chrono::milliseconds(100));
  while (s.finish == Finish::kRunning);
  return s;
}

TEST(ServeEngine, RequestsTogetherGetWhatEachGetsAlone) {
  const Tiny m(tiny_llama());
  BatchedDecoder dec(m.reg, m.params.data(), small_steps());
  Communicator none;
  Engine engine(dec, none, 16);
  std::thread loop([&] { engine.serve(); });
  const auto prompts = random_texts({9, 13, 10, 11, 12, 9}, m.cfg.vocab_size, 3);
  std::vector<std::shared_ptr<RequestStream>> reqs;
  for (const auto& p : prompts) {
    GenerationParams g;
    g.prompt = p;
    g.max_tokens = 8;
    g.sampling.temperature = 0;
    g.prompt_logprobs = true;
    reqs.push_back(std::make_shared<RequestStream>(g));
  }
  ASSERT_EQ(engine.submit(reqs), Admission::kQueued);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const StreamSnapshot s = wait_done(*reqs[i]);
    const Alone a = greedy_alone(m, prompts[i], 8);
    ASSERT_EQ(s.finish, Finish::kLength) << i;
    ASSERT_EQ(s.tokens.size(), 8u) << i;
    ASSERT_EQ(s.prompt.size(), prompts[i].size() - 1) << i;
    for (size_t k = 0; k < 8; ++k) {
      EXPECT_EQ(s.tokens[k].id, a.tokens[k]) << "request " << i << " token " << k;
      EXPECT_NEAR(s.tokens[k].logprob, a.logprobs[k], 1e-5) << i;
    }
    for (size_t k = 0; k < s.prompt.size(); ++k)
      EXPECT_NEAR(s.prompt[k].logprob, a.prompt_logprobs[k], 1e-5) << i;
  }
  EXPECT_GT(engine.load().steps, 8);
  engine.stop();
  loop.join();
  EXPECT_EQ(dec.pool().live_sequences(), 0);
  EXPECT_EQ(dec.pool().free_blocks(), dec.pool().blocks());
}

TEST(ServeEngine, StopTokensZeroTokensCancellationAndAFullQueue) {
  const Tiny m(tiny_gpt2());
  BatchedDecoder dec(m.reg, m.params.data(), small_steps());
  Communicator none;
  Engine engine(dec, none, 3);
  const auto prompt = random_texts({6}, m.cfg.vocab_size, 9)[0];
  const Alone a = greedy_alone(m, prompt, 6);
  GenerationParams g;
  g.prompt = prompt;
  g.sampling.temperature = 0;
  // Cancelled while waiting: never admitted.
  auto waiting = std::make_shared<RequestStream>(g);
  ASSERT_EQ(engine.submit({waiting}), Admission::kQueued);
  // A full queue refuses the whole submission (nothing runs yet): 1 + 4 > 3.
  std::vector<std::shared_ptr<RequestStream>> four;
  for (int i = 0; i < 4; ++i) four.push_back(std::make_shared<RequestStream>(g));
  EXPECT_EQ(engine.submit(four), Admission::kQueueFull);
  waiting->cancel();
  std::thread loop([&] { engine.serve(); });
  // Stops at the third greedy token when it is a stop id, and shows it.
  g.max_tokens = 6;
  g.stop_ids = {a.tokens[2]};
  auto stopped = std::make_shared<RequestStream>(g);
  // max_tokens 0: the prompt's log-probabilities only.
  g.max_tokens = 0;
  g.stop_ids = {};
  g.prompt_logprobs = true;
  auto scored = std::make_shared<RequestStream>(g);
  ASSERT_EQ(engine.submit({stopped, scored}), Admission::kQueued);
  EXPECT_EQ(wait_done(*waiting).finish, Finish::kCancelled);
  EXPECT_TRUE(waiting->wait(0, std::chrono::milliseconds(0)).tokens.empty());
  const StreamSnapshot s = wait_done(*stopped);
  EXPECT_EQ(s.finish, Finish::kStop);
  size_t first = 0;
  while (a.tokens[first] != a.tokens[2]) ++first;  // the stop id may come earlier
  EXPECT_EQ(s.tokens.size(), first + 1);
  const StreamSnapshot z = wait_done(*scored);
  EXPECT_EQ(z.finish, Finish::kLength);
  EXPECT_TRUE(z.tokens.empty());
  ASSERT_EQ(z.prompt.size(), prompt.size() - 1);
  EXPECT_NEAR(z.prompt.back().logprob, a.prompt_logprobs.back(), 1e-5);
  // Cancelled mid-way: it ends (as cancelled, unless its 18 tokens were
  // already made) and its blocks go back.
  g.max_tokens = 18;
  g.prompt_logprobs = false;
  auto gone = std::make_shared<RequestStream>(g);
  ASSERT_EQ(engine.submit({gone}), Admission::kQueued);
  gone->wait(0, std::chrono::seconds(10));  // its first token
  gone->cancel();
  const Finish f = wait_done(*gone).finish;
  EXPECT_TRUE(f == Finish::kCancelled || f == Finish::kLength);
  for (int i = 0; i < 100 && dec.pool().live_sequences() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  // More than the bound at once, with nothing else waiting: admitted whole.
  while (engine.load().queued > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  g.max_tokens = 2;
  for (auto& r : four) r = std::make_shared<RequestStream>(g);
  ASSERT_EQ(engine.submit(four), Admission::kQueued);
  for (auto& r : four) EXPECT_EQ(wait_done(*r).finish, Finish::kLength);
  engine.stop();
  loop.join();
  EXPECT_EQ(dec.pool().free_blocks(), dec.pool().blocks());
  EXPECT_EQ(engine.submit({gone}), Admission::kStopping);
}

}  // namespace engine_test
}  // namespace mt::serve
