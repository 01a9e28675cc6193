// `mpirun -n 2 megatron serve --tensor-model-parallel-size 2` (and
// --expert-model-parallel-size 2 on a MoE): rank 0 serves HTTP and both ranks
// decode; the answers equal the one-rank server's (text exactly,
// log-probabilities to 1e-4), and SIGTERM to rank 0 ends the job with exit 0.
#include "serve/serve_test_util.h"

namespace mt::test::serve {
namespace tensor_parallel_test {

struct Answers {
  std::string completion, streamed;
  Json api;                          // PUT /api's answer
  std::vector<std::string> together;  // 8 completions sent at once
};

const char* kTogether[] = {"The cat", "A dog likes", "My friend finds the", "Her brother",
                           "The queen helps", "T", "The old king calls a", "His horse"};

Answers ask(int port, const TempDir& dir) {
  Answers a;
  a.completion = greedy_completion(port, "The cat sees", 20);
  const Reply s = post(port, "/v1/completions",
                       {{"prompt", "The cat sees"}, {"max_tokens", 20}, {"temperature", 0}, {"stream", true}});
  EXPECT_EQ(s.status, 200) << s.body;
  for (const std::string& e : sse_data(s.body)) {
    if (e == "[DONE]") break;
    const Json c = Json::parse(e, nullptr, false);
    if (c.is_object() && !c.at("choices").empty()) a.streamed += c.at("choices")[0].at("text").get<std::string>();
  }
  const Reply api = curl(port, "PUT", "/api",
                         {{"prompts", {"The cat sees", "My friend li"}}, {"tokens_to_generate", 16}, {"logprobs", true},
                          {"top_k", 1}},
                         dir);
  EXPECT_EQ(api.status, 200) << api.body;
  a.api = Json::parse(api.body, nullptr, false);
  // Requests joining and leaving the batch at different steps: every rank
  // must replay the same plan.
  a.together.resize(std::size(kTogether));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < std::size(kTogether); ++i)
    threads.emplace_back([&, i] { a.together[i] = greedy_completion(port, kTogether[i], 6 + 3 * int(i)); });
  for (auto& t : threads) t.join();
  return a;
}

// The one-rank server's answers on `ckpt`, then those of `mpirun -n 2
// megatron serve <flags>`: equal; SIGTERM to rank 0 ends the job with exit 0.
void expect_two_ranks_answer_as_one(const std::string& ckpt, const std::string& flags, const std::string& tag) {
  TempDir dir;
  ASSERT_FALSE(ckpt.empty());
  Answers one;
  {
    auto server = start_server(ckpt, "", dir);
    ASSERT_GT(server->port(), 0);
    one = ask(server->port(), dir);
    EXPECT_EQ(server->stop(SIGTERM), 0) << server->log();
  }
  ASSERT_EQ(one.completion.size(), 20u);
  EXPECT_EQ(one.streamed, one.completion);
  ASSERT_TRUE(one.api.is_object() && one.api.contains("logprobs")) << one.api.dump();

  // The model name marks this test's processes, to find rank 0 among them.
  const std::string marker = tag + "-" + std::to_string(::getpid());
  auto server = start_server(ckpt, flags + " --served-model-name " + marker, dir, mpirun(2));
  ASSERT_GT(server->port(), 0);
  const Answers two = ask(server->port(), dir);
  EXPECT_EQ(two.completion, one.completion) << tag;
  EXPECT_EQ(two.streamed, one.completion) << tag;
  ASSERT_TRUE(two.api.is_object() && two.api.contains("logprobs")) << two.api.dump();
  EXPECT_EQ(two.api.at("text"), one.api.at("text")) << tag;
  EXPECT_EQ(two.api.at("tokens"), one.api.at("tokens")) << tag;
  for (size_t i = 0; i < std::size(kTogether); ++i) {
    EXPECT_EQ(one.together[i].size(), size_t(6 + 3 * i)) << kTogether[i];
    EXPECT_EQ(two.together[i], one.together[i]) << tag << ": '" << kTogether[i] << "' with 7 others";
  }
  for (size_t p = 0; p < 2; ++p) {
    const std::vector<double> a = one.api.at("logprobs")[p], b = two.api.at("logprobs")[p];
    ASSERT_EQ(a.size(), b.size());
    for (size_t t = 0; t < a.size(); ++t) EXPECT_NEAR(b[t], a[t], 1e-4) << tag << " prompt " << p << " token " << t + 1;
  }
  const Reply models = request(server->port(), "GET", "/v1/models");
  EXPECT_EQ(models.json().at("data")[0].at("id"), marker) << models.body;

  const std::vector<pid_t> rank0 = BackgroundRun::pids_matching(marker, 0);
  ASSERT_EQ(rank0.size(), 1u) << "rank 0's process";
  EXPECT_EQ(server->stop(SIGTERM, 30, rank0[0]), 0) << "SIGTERM to rank 0 ends the job with exit 0:\n" << server->log();
}

TEST(ServeTp2, AnswersAsOneRank) {
  expect_two_ranks_answer_as_one(char_checkpoint(), "--tensor-model-parallel-size 2", "tp2");
}

// A MoE checkpoint with its 4 experts split over 2 ranks.
TEST(ServeEp2, MoeAnswersAsOneRank) {
  expect_two_ranks_answer_as_one(moe_checkpoint(), "--expert-model-parallel-size 2", "ep2");
}

}  // namespace tensor_parallel_test
}  // namespace mt::test::serve
