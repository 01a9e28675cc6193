// `PUT /api`, Megatron-LM's text generation server (tools/
// run_text_generation_server.py), driven by curl: greedy text as `megatron
// generate`, log-probabilities as `megatron score`, and its validation
// messages; and /v1/completions's token-id prompts.
#include "serve/serve_test_util.h"

namespace mt::test::serve {
namespace api_test {

class ServeApi : public ServerSuite {
 protected:
  static void SetUpTestSuite() { s_ = new SuiteServer(); }
};

TEST_F(ServeApi, GreedyWithLogprobsEqualsGenerateAndScore) {
  // (of one length: Megatron's server pads a batch's prompts to the longest
  // and generates tokens_to_generate past it)
  const std::vector<std::string> prompts = {"The cat sees", "My friend li"};
  constexpr int kTokens = 20;
  const Reply r = curl(s_->port(), "PUT", "/api",
                       {{"prompts", prompts}, {"tokens_to_generate", kTokens}, {"logprobs", true}, {"top_k", 1}}, dir);
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = Json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.body;
  for (const char* key : {"text", "segments", "tokens", "logprobs"})
    ASSERT_EQ(j.at(key).size(), prompts.size()) << key << ": " << r.body;
  const Json vocab = Json::parse(read_text(fs::path(s_->ckpt).parent_path().string() + "/corpus_vocab.json"));
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string& p = prompts[i];
    const std::string text = j.at("text")[i];
    EXPECT_EQ(text, p + generate_continuation(s_->ckpt, p, kTokens, dir)) << i;
    const std::vector<int64_t> tokens = j.at("tokens")[i];
    ASSERT_EQ(tokens.size(), p.size() + kTokens) << "the prompt's ids, then the generated ones";
    std::string from_ids, from_segments;
    for (int64_t t : tokens) from_ids += vocab.at(size_t(t)).get<std::string>();
    for (const Json& seg : j.at("segments")[i]) from_segments += seg.get<std::string>();
    EXPECT_EQ(from_ids, text);
    EXPECT_EQ(from_segments, text);
    EXPECT_EQ(j.at("segments")[i].size(), tokens.size());
    const std::vector<double> got = j.at("logprobs")[i];
    ASSERT_EQ(got.size(), tokens.size() - 1) << "one per token after the first";
    const std::vector<double> want = score_log_probs(s_->ckpt, text, dir);
    ASSERT_EQ(want.size(), got.size());
    for (size_t t = 0; t < got.size(); ++t) EXPECT_NEAR(got[t], want[t], 1e-4) << "prompt " << i << " token " << t + 1;
  }
  // Without logprobs the same text, and no log-probabilities.
  const Reply plain = curl(s_->port(), "PUT", "/api", {{"prompts", prompts}, {"tokens_to_generate", kTokens}, {"top_k", 1}}, dir);
  ASSERT_EQ(plain.status, 200) << plain.body;
  const Json pj = Json::parse(plain.body, nullptr, false);
  EXPECT_EQ(pj.at("text"), j.at("text"));
  EXPECT_TRUE(!pj.contains("logprobs") || pj.at("logprobs").is_null()) << plain.body;
}

// Sampling with random_seed repeats itself; other seeds sample other text.
TEST_F(ServeApi, RandomSeedRepeatsTheSample) {
  auto sample = [&](int seed) {
    const Reply r = curl(s_->port(), "PUT", "/api",
                         {{"prompts", {"The cat sees", "Her brother"}}, {"tokens_to_generate", 16}, {"temperature", 1.0},
                          {"random_seed", seed}},
                         dir);
    EXPECT_EQ(r.status, 200) << r.body;
    const Json j = Json::parse(r.body, nullptr, false);
    return j.is_object() ? j.at("text") : Json();
  };
  const Json a = sample(7);
  EXPECT_EQ(sample(7), a);
  EXPECT_TRUE(sample(8) != a || sample(9) != a) << a.dump();
}

// stop_token ends a generation when that id is generated; as in Megatron
// (detokenize_generations), text and segments come from the same ids, the
// stop token included.
TEST_F(ServeApi, StopTokenEndsTheGenerationAndTextMatchesTheSegments) {
  const Reply greedy = curl(s_->port(), "PUT", "/api", {{"prompts", {"The cat sees"}}, {"tokens_to_generate", 16}, {"top_k", 1}}, dir);
  ASSERT_EQ(greedy.status, 200) << greedy.body;
  const std::vector<int64_t> all = Json::parse(greedy.body).at("tokens")[0];
  const size_t prompt = std::string("The cat sees").size();
  // a generated id not first seen in the first 2 generated tokens
  size_t k = prompt + 2;
  while (k < all.size() && std::find(all.begin() + long(prompt), all.begin() + long(k), all[k]) != all.begin() + long(k)) ++k;
  ASSERT_LT(k, all.size()) << greedy.body;
  const Reply r = curl(s_->port(), "PUT", "/api",
                       {{"prompts", {"The cat sees"}}, {"tokens_to_generate", 16}, {"top_k", 1}, {"stop_token", all[k]}}, dir);
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = Json::parse(r.body);
  const std::vector<int64_t> tokens = j.at("tokens")[0];
  EXPECT_EQ(tokens, std::vector<int64_t>(all.begin(), all.begin() + long(k) + 1)) << "up to the stop token, included";
  std::string joined;
  for (const Json& seg : j.at("segments")[0]) joined += seg.get<std::string>();
  EXPECT_EQ(j.at("text")[0].get<std::string>(), joined) << r.body;
}

// Up to 128 prompts in one request are served (on an idle server with the
// default --max-queued-requests 64 too): the limit is Megatron's 128.
TEST_F(ServeApi, OneHundredTwentyEightPromptsAreServed) {
  std::vector<std::string> prompts;
  for (int i = 0; i < 128; ++i) prompts.push_back(i % 2 ? "The cat" : "A dog");
  const Reply api = curl(s_->port(), "PUT", "/api", {{"prompts", prompts}, {"tokens_to_generate", 2}, {"top_k", 1}}, dir);
  ASSERT_EQ(api.status, 200) << api.body;
  EXPECT_EQ(Json::parse(api.body).at("text").size(), 128u);
  const Reply v1 = post(s_->port(), "/v1/completions", {{"prompt", prompts}, {"max_tokens", 2}, {"temperature", 0}});
  ASSERT_EQ(v1.status, 200) << v1.body;
  EXPECT_EQ(v1.json().at("choices").size(), 128u);
}

// Megatron's messages, status 400, the body a JSON string.
TEST_F(ServeApi, ValidationErrorsAreMegatronsMessages) {
  Json too_many = Json::array();
  for (int i = 0; i < 129; ++i) too_many.push_back("a");
  const struct {
    Json body;
    const char* message;
  } cases[] = {
      {Json::object(), "prompts argument required"},
      {{{"tokens_to_generate", 4}}, "prompts argument required"},
      {{{"prompts", "The cat"}}, "prompts is not a list of strings"},
      {{{"prompts", {1, 2}}}, "prompts is not a list of strings"},
      {{{"prompts", too_many}}, "Maximum number of prompts is 128"},
      {{{"prompts", {"The cat"}}, {"tokens_to_generate", "four"}}, "tokens_to_generate must be an integer greater than 0"},
      {{{"prompts", {"The cat"}}, {"temperature", 0}}, "temperature must be a positive number less than or equal to 100.0"},
      {{{"prompts", {"The cat"}}, {"temperature", 101}}, "temperature must be a positive number less than or equal to 100.0"},
      {{{"prompts", {"The cat"}}, {"temperature", "hot"}}, "temperature must be a positive number less than or equal to 100.0"},
  };
  for (const auto& c : cases) {
    const Reply r = curl(s_->port(), "PUT", "/api", c.body, dir);
    EXPECT_EQ(r.status, 400) << c.body.dump() << " -> " << r.body;
    const Json j = Json::parse(r.body, nullptr, false);
    EXPECT_TRUE(j.is_string()) << c.body.dump() << " -> " << r.body;
    if (j.is_string()) {
      EXPECT_EQ(j.get<std::string>(), c.message) << c.body.dump();
    }
  }
  // and it still answers
  const Reply ok = curl(s_->port(), "PUT", "/api", {{"prompts", {"The cat"}}, {"tokens_to_generate", 3}}, dir);
  EXPECT_EQ(ok.status, 200) << ok.body;
}

// /v1/completions takes a prompt as token ids (a list of ints, or a list of
// them): the same answer as its text; a list of prompts answers in order.
TEST_F(ServeApi, CompletionPromptsAsTextListsAndTokenIds) {
  const Json vocab = Json::parse(read_text(fs::path(s_->ckpt).parent_path().string() + "/corpus_vocab.json"));
  auto ids = [&](const std::string& text) {
    std::vector<int> out;
    for (char ch : text)
      for (size_t v = 0; v < vocab.size(); ++v)
        if (vocab[v] == std::string(1, ch)) out.push_back(int(v));
    EXPECT_EQ(out.size(), text.size()) << text;
    return out;
  };
  const std::string a = "The cat sees", b = "Her brother";
  const std::string ta = greedy_completion(s_->port(), a, 12), tb = greedy_completion(s_->port(), b, 12);
  ASSERT_EQ(ta.size(), 12u);
  for (const Json& prompt : {Json(ids(a)), Json::array({ids(a), ids(b)}), Json::array({a, b})}) {
    const Reply r = post(s_->port(), "/v1/completions", {{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}});
    ASSERT_EQ(r.status, 200) << prompt.dump() << " -> " << r.body;
    const Json j = r.json();
    const Json& choices = j.at("choices");
    ASSERT_EQ(choices.size(), prompt.at(0).is_number() ? 1u : 2u) << r.body;
    for (size_t i = 0; i < choices.size(); ++i) {
      EXPECT_EQ(choices[i].at("index"), int(i));
      EXPECT_EQ(choices[i].at("text"), i == 0 ? ta : tb) << prompt.dump();
    }
  }
}

}  // namespace api_test
}  // namespace mt::test::serve
