// Requests served together (continuous batching) answer exactly as each
// does alone: 16 greedy completions of different prompts and lengths, half
// of them streamed, and seeded sampling.
#include <latch>

#include "serve/serve_test_util.h"

namespace mt::test::serve {
namespace concurrency_test {

class ServeConcurrency : public ServerSuite {
 protected:
  static void SetUpTestSuite() { s_ = new SuiteServer("--inference-max-requests 16"); }
};

// A completion's text: the JSON answer's, or the streamed chunks' joined.
std::string completion_text(int port, const Json& body) {
  const Reply r = post(port, "/v1/completions", body);
  EXPECT_EQ(r.status, 200) << body.dump() << " -> " << r.body << r.error;
  if (r.status != 200) return "<status " + std::to_string(r.status) += ">";
  if (!body.value("stream", false)) return r.json().at("choices").at(0).at("text");
  std::string text;
  const std::vector<std::string> events = sse_data(r.body);
  EXPECT_FALSE(events.empty()) << r.body;
  EXPECT_EQ(events.empty() ? "" : events.back(), "[DONE]") << r.body;
  for (const std::string& e : events) {
    if (e == "[DONE]") break;
    const Json chunk = Json::parse(e, nullptr, false);
    EXPECT_TRUE(chunk.is_object()) << e;
    if (chunk.is_object() && !chunk.at("choices").empty()) text += chunk.at("choices")[0].at("text").get<std::string>();
  }
  return text;
}

// Every body at once, from its own thread and connection, released together.
std::vector<std::string> together(int port, const std::vector<Json>& bodies) {
  std::vector<std::string> out(bodies.size());
  std::latch start(std::ptrdiff_t(bodies.size()));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < bodies.size(); ++i)
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      out[i] = completion_text(port, bodies[i]);
    });
  for (auto& t : threads) t.join();
  return out;
}

const std::vector<std::string> kPrompts = {
    "The cat sees", "A dog", "My friend likes the", "Her brother calls a small", "The queen", "T",
    "The old king finds his", "A dog helps the garden. The", "My", "Her brother follows the river.",
    "The cat calls", "A red", "the castle", "The queen helps a dog. My friend", "His horse", "The old"};

TEST_F(ServeConcurrency, SixteenGreedyRequestsAnswerAsEachAlone) {
  std::vector<Json> bodies;
  for (size_t i = 0; i < kPrompts.size(); ++i)
    bodies.push_back({{"prompt", kPrompts[i]}, {"max_tokens", 6 + int(i % 6) * 3}, {"temperature", 0},
                      {"stream", i % 2 == 1}});
  std::vector<std::string> alone;
  for (const Json& b : bodies) alone.push_back(completion_text(s_->port(), b));
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::string> both = together(s_->port(), bodies);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t i = 0; i < bodies.size(); ++i) {
    EXPECT_EQ(alone[i].size(), bodies[i].at("max_tokens").get<size_t>()) << kPrompts[i] << ": " << alone[i];
    EXPECT_EQ(both[i], alone[i]) << "'" << kPrompts[i] << "' together with 15 others"
                                 << (bodies[i].at("stream").get<bool>() ? " (streamed)" : "");
  }
  // and both equal `megatron generate`'s
  for (size_t i : {size_t(2), size_t(7)})
    EXPECT_EQ(alone[i], generate_continuation(s_->ckpt, kPrompts[i], bodies[i].at("max_tokens"), dir)) << kPrompts[i];
  std::printf("[ 16 concurrent completions in %.2f s ]\n", secs);
}

TEST_F(ServeConcurrency, SeededSamplingAnswersAsAlone) {
  std::vector<Json> bodies;
  for (int i = 0; i < 8; ++i)
    bodies.push_back({{"prompt", kPrompts[size_t(i)]}, {"max_tokens", 12}, {"temperature", 1.0}, {"top_k", 20},
                      {"seed", 100 + i}, {"stream", i % 2 == 0}});
  std::vector<std::string> alone;
  for (const Json& b : bodies) alone.push_back(completion_text(s_->port(), b));
  const std::vector<std::string> both = together(s_->port(), bodies);
  for (size_t i = 0; i < bodies.size(); ++i) EXPECT_EQ(both[i], alone[i]) << kPrompts[i] << " seed " << 100 + i;
  // The seed decides: another seed samples another text for some prompt.
  int differ = 0;
  for (size_t i = 0; i < bodies.size(); ++i) {
    Json other = bodies[i];
    other["seed"] = 999;
    differ += completion_text(s_->port(), other) != alone[i];
  }
  EXPECT_GT(differ, 0);
}

// PUT /api with log-probabilities: 8 requests together get each the text
// and the log-probabilities it gets alone.
TEST_F(ServeConcurrency, ApiLogprobsTogetherAsAlone) {
  std::vector<Json> bodies;
  for (size_t i = 0; i < 8; ++i)
    bodies.push_back({{"prompts", {kPrompts[i]}}, {"tokens_to_generate", 10 + int(i)}, {"logprobs", true}, {"top_k", 1}});
  auto ask = [&](const Json& b) {
    const Reply r = request(s_->port(), "PUT", "/api", b.dump());
    EXPECT_EQ(r.status, 200) << b.dump() << " -> " << r.body;
    return r.json();
  };
  std::vector<Json> alone, both(bodies.size());
  for (const Json& b : bodies) alone.push_back(ask(b));
  std::latch start(std::ptrdiff_t(bodies.size()));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < bodies.size(); ++i)
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      both[i] = ask(bodies[i]);
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < bodies.size(); ++i) {
    ASSERT_TRUE(alone[i].is_object() && both[i].is_object()) << i;
    EXPECT_EQ(both[i].at("text"), alone[i].at("text")) << kPrompts[i];
    const std::vector<double> a = alone[i].at("logprobs")[0], b = both[i].at("logprobs")[0];
    ASSERT_EQ(a.size(), b.size()) << kPrompts[i];
    for (size_t t = 0; t < a.size(); ++t) EXPECT_NEAR(b[t], a[t], 1e-5) << kPrompts[i] << " token " << t + 1;
  }
}

// A stream is Server-Sent Events: text/event-stream, "data: {json}\n\n"
// events, the last "data: [DONE]\n\n".
TEST_F(ServeConcurrency, StreamIsServerSentEvents) {
  const Reply r = post(s_->port(), "/v1/completions",
                       {{"prompt", "The cat"}, {"max_tokens", 6}, {"temperature", 0}, {"stream", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type.rfind("text/event-stream", 0), 0u) << r.content_type;
  ASSERT_EQ(r.body.rfind("data: ", 0), 0u) << r.body;
  const std::string done = "data: [DONE]\n\n";
  ASSERT_GE(r.body.size(), done.size());
  EXPECT_EQ(r.body.substr(r.body.size() - done.size()), done) << r.body;
  size_t events = 0;
  for (size_t pos = 0; pos < r.body.size();) {
    const size_t end = r.body.find("\n\n", pos);
    ASSERT_NE(end, std::string::npos) << "an event without its blank line: " << r.body.substr(pos);
    const std::string e = r.body.substr(pos, end - pos);
    ASSERT_EQ(e.rfind("data: ", 0), 0u) << e;
    if (e != "data: [DONE]") {
      EXPECT_TRUE(Json::parse(e.substr(6), nullptr, false).is_object()) << e;
    }
    ++events;
    pos = end + 2;
  }
  EXPECT_GE(events, 3u) << r.body;
}

}  // namespace concurrency_test
}  // namespace mt::test::serve
