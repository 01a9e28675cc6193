// What a client can get wrong, and the server must survive: malformed JSON
// and wrong types (400 with OpenAI's error object naming the parameter),
// impossible max_tokens and prompts longer than the context, a body over
// --max-request-bytes (413), unknown paths (404), a client that leaves in
// the middle of a stream, and a burst of 200 requests against a small queue
// (200 or 429 each, nothing hangs, no memory kept).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <latch>
#include <mutex>

#include "serve/serve_test_util.h"

namespace mt::test::serve {
namespace bad_input_test {

class ServeBadInput : public ServerSuite {
 protected:
  static void SetUpTestSuite() { s_ = new SuiteServer(); }
};

// OpenAI's error object: {"error": {"message", "type", "param", "code"}}.
void expect_error(const Reply& r, int status, const std::string& what, const std::string& param = "") {
  EXPECT_EQ(r.status, status) << what << " -> " << r.body << r.error;
  const Json j = r.json();
  ASSERT_TRUE(j.is_object() && j.contains("error") && j.at("error").is_object()) << what << " -> " << r.body;
  const Json& e = j.at("error");
  for (const char* key : {"message", "type", "param", "code"}) EXPECT_TRUE(e.contains(key)) << what << ": no " << key << " in " << r.body;
  EXPECT_TRUE(e.value("message", "").size() > 0) << what << " -> " << r.body;
  if (!param.empty()) {
    EXPECT_EQ(e.value("param", Json()).dump(), Json(param).dump()) << what << " -> " << r.body;
  }
}

TEST_F(ServeBadInput, MalformedJsonAndWrongTypesAre400NamingTheParameter) {
  const struct {
    const char* path;
    std::string body;
    const char* param;  // "" when none in particular
  } cases[] = {
      {"/v1/completions", "{\"prompt\": \"The cat\", ", ""},
      {"/v1/completions", "not json at all", ""},
      {"/v1/completions", "[1, 2, 3]", ""},
      {"/v1/completions", R"({"max_tokens": 4})", "prompt"},
      {"/v1/completions", R"({"prompt": 5, "max_tokens": 4})", "prompt"},
      {"/v1/completions", R"({"prompt": {"a": 1}, "max_tokens": 4})", "prompt"},
      {"/v1/completions", R"({"prompt": [1, "x"], "max_tokens": 4})", "prompt"},
      {"/v1/completions", R"({"prompt": [100000], "max_tokens": 4})", "prompt"},
      {"/v1/completions", R"({"prompt": "The cat", "max_tokens": "ten"})", "max_tokens"},
      {"/v1/completions", R"({"prompt": "The cat", "max_tokens": 2.5})", "max_tokens"},
      {"/v1/completions", R"({"prompt": "The cat", "temperature": "hot"})", "temperature"},
      {"/v1/completions", R"({"prompt": "The cat", "temperature": -1})", "temperature"},
      {"/v1/completions", R"({"prompt": "The cat", "top_p": 1.5})", "top_p"},
      {"/v1/completions", R"({"prompt": "The cat", "stop": 3})", "stop"},
      {"/v1/completions", R"({"prompt": "The cat", "stream": "yes"})", "stream"},
      {"/v1/completions", R"({"prompt": "The cat", "logprobs": 6})", "logprobs"},
      {"/v1/completions", R"({"prompt": "The cat", "n": 3})", "n"},
      {"/v1/chat/completions", "{\"messages\": [", ""},
      {"/v1/chat/completions", R"({"messages": "hi"})", "messages"},
  };
  for (const auto& c : cases) {
    const Reply r = request(s_->port(), "POST", c.path, c.body);
    expect_error(r, 400, std::string(c.path) + " " + c.body, c.param);
  }
  EXPECT_EQ(greedy_completion(s_->port(), "The cat", 4).size(), 4u) << "the server goes on serving";
}

// Text the tokenizer cannot encode (the character tokenizer knows only its
// corpus's characters) is the client's error, not the server's.
TEST_F(ServeBadInput, TextOutsideTheVocabularyIs400) {
  expect_error(post(s_->port(), "/v1/completions", {{"prompt", "Zebra"}, {"max_tokens", 2}}), 400, "'Z' not in the vocabulary",
               "prompt");
  const Reply api = request(s_->port(), "PUT", "/api", Json{{"prompts", {"Zebra"}}, {"tokens_to_generate", 2}}.dump());
  EXPECT_EQ(api.status, 400) << api.body;
  EXPECT_TRUE(api.json().is_string()) << "Megatron's API answers a JSON string: " << api.body;
}

TEST_F(ServeBadInput, MaxTokensNegativeHugeOrPastTheContextIs400) {
  expect_error(post(s_->port(), "/v1/completions", {{"prompt", "The cat"}, {"max_tokens", -1}}), 400, "max_tokens -1",
               "max_tokens");
  const Reply huge = post(s_->port(), "/v1/completions", {{"prompt", "The cat"}, {"max_tokens", 1000000000}});
  expect_error(huge, 400, "max_tokens 10^9");
  EXPECT_NE(huge.body.find(std::to_string(kContext)), std::string::npos) << "names the context length: " << huge.body;
  // prompt + max_tokens just past the context, and a prompt alone longer than it
  const std::string p60(60, 'a');
  const Reply past = post(s_->port(), "/v1/completions", {{"prompt", p60}, {"max_tokens", 5}});
  expect_error(past, 400, "60 + 5 tokens");
  EXPECT_NE(past.body.find(std::to_string(kContext)), std::string::npos) << past.body;
  const Reply longer = post(s_->port(), "/v1/completions", {{"prompt", std::string(100, 'a')}, {"max_tokens", 1}});
  expect_error(longer, 400, "a prompt of 100 tokens");
  EXPECT_NE(longer.body.find(std::to_string(kContext)), std::string::npos) << longer.body;
  // exactly the context is fine
  const Reply fits = post(s_->port(), "/v1/completions", {{"prompt", p60}, {"max_tokens", 4}, {"temperature", 0}});
  EXPECT_EQ(fits.status, 200) << fits.body;
  // /api too (Megatron's message is a JSON string)
  const Reply api = request(s_->port(), "PUT", "/api", Json{{"prompts", {std::string(100, 'a')}}, {"tokens_to_generate", 4}}.dump());
  EXPECT_EQ(api.status, 400) << api.body;
}

TEST_F(ServeBadInput, BodyOverMaxRequestBytesIs413AndUnknownPathIs404) {
  const std::string big = Json{{"prompt", std::string(10 << 20, 'a')}, {"max_tokens", 1}}.dump();
  expect_error(request(s_->port(), "POST", "/v1/completions", big), 413, "a 10 MB body");
  expect_error(request(s_->port(), "GET", "/v1/nothing"), 404, "GET /v1/nothing");
  expect_error(request(s_->port(), "POST", "/v1/engines/x/completions", "{}"), 404, "POST an unknown path");
  EXPECT_EQ(greedy_completion(s_->port(), "The cat", 4).size(), 4u) << "the server goes on serving";
}

// Sends a streaming completion on a raw socket, reads until the first
// `data:` event (or `bytes` bytes), and closes the connection.
bool leave_mid_stream(int port, const std::string& body) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return false;
  }
  timeval tv{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  bool sent = ::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == ssize_t(req.size());
  std::string got;
  char buf[256];
  while (sent && got.find("data:") == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, size_t(n));
  }
  ::close(fd);
  return got.find("data:") != std::string::npos;
}

// Waits until the health check says nothing runs or waits; its last answer.
Json wait_idle(int port, double seconds) {
  Json health;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  do {
    const Reply h = request(port, "GET", "/health");
    EXPECT_EQ(h.status, 200) << h.body;
    health = h.json();
    if (health.value("running", -1) == 0 && health.value("queued", -1) == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (std::chrono::steady_clock::now() < until);
  return health;
}

// A client leaving in the middle of a long stream (on a model slow enough
// that its 900 tokens take a second or so): the server stays up, the next
// request gets its usual answer, and the generation of the client gone ends
// well before it would have finished (the health check's load drops to
// nothing running or queued).
TEST(ServeClientGone, LeavingMidStreamEndsItsGenerationAndTheServerServesOn) {
  TempDir dir;
  const std::string ckpt = wide_checkpoint();
  ASSERT_FALSE(ckpt.empty());
  auto server = start_server(ckpt, "", dir);
  const int port = server->port();
  ASSERT_GT(port, 0);
  const std::string want = greedy_completion(port, "The cat sees", 16);
  ASSERT_EQ(want.size(), 16u);
  const Json body = {{"prompt", "A dog"}, {"max_tokens", 900}, {"stream", true}, {"temperature", 0}};
  Json whole = body;
  whole["stream"] = false;
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(post(port, "/v1/completions", whole).status, 200);
  const double full_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  double slowest_idle_s = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(leave_mid_stream(port, body.dump())) << "no first event before leaving, try " << i;
    t0 = std::chrono::steady_clock::now();
    const Json idle = wait_idle(port, 30);
    const double idle_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    slowest_idle_s = std::max(slowest_idle_s, idle_s);
    EXPECT_EQ(idle.value("running", -1), 0) << idle.dump();
    EXPECT_EQ(idle.value("queued", -1), 0) << idle.dump();
    // (Only where the whole generation takes long enough to tell.)
    if (full_s > 0.3) {
      EXPECT_LT(idle_s, full_s / 2) << "the generation went on after its client left: idle after " << idle_s
                                    << " s, the whole takes " << full_s << " s";
    }
    EXPECT_EQ(greedy_completion(port, "The cat sees", 16), want) << "after a client left, try " << i;
  }
  // several leaving at once while another request runs
  std::vector<std::thread> leavers;
  for (int i = 0; i < 4; ++i) leavers.emplace_back([&] { EXPECT_TRUE(leave_mid_stream(port, body.dump())); });
  const std::string during = greedy_completion(port, "The cat sees", 16);
  for (auto& t : leavers) t.join();
  EXPECT_EQ(during, want);
  const Json idle = wait_idle(port, 30);
  EXPECT_EQ(idle.value("running", -1), 0) << idle.dump();
  EXPECT_TRUE(server->running()) << server->log();
  std::printf("[ 900 tokens in %.2f s; idle at most %.3f s after a client left ]\n", full_s, slowest_idle_s);
  EXPECT_EQ(server->stop(SIGTERM), 0) << server->log();
}

// A small queue: of 200 requests sent at once, each is answered 200 or 429
// (none hangs or is dropped), some are refused, the server stays up, and its
// resident memory after the burst is where it was before. Then a body over
// a small --max-request-bytes: 413.
std::string prompt_of(int i) {
  static const char* kPrompts[] = {"The cat", "A dog likes", "My friend", "Her brother sees the", "The queen"};
  return kPrompts[i % 5];
}

class ServeBurst : public ::testing::Test {
 protected:
  TempDir dir;
};

TEST_F(ServeBurst, TwoHundredAtOnceGet200Or429AndNoMemoryIsKept) {
  const std::string ckpt = char_checkpoint();
  ASSERT_FALSE(ckpt.empty());
  auto server = start_server(ckpt, "--inference-max-requests 2 --max-queued-requests 2 --max-request-bytes 4096", dir);
  ASSERT_GT(server->port(), 0);
  const int port = server->port();
  std::mutex errors_mu;
  std::map<std::string, int> errors;  // why requests got no answer
  Reply refusal;                      // a 429
  auto burst = [&](int n, std::map<int, int>* statuses) {
    std::vector<int> status(size_t(n), -1);
    std::latch start(n);
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i)
      threads.emplace_back([&, i] {
        const Json body = {{"prompt", prompt_of(i)}, {"max_tokens", 8}, {"temperature", 0}, {"stream", i % 3 == 0}};
        start.arrive_and_wait();
        const Reply r = post(port, "/v1/completions", body, 120);
        status[size_t(i)] = r.status;
        if (r.status == 429) {
          std::lock_guard<std::mutex> lock(errors_mu);
          refusal = r;
        }
        if (r.status == 0) {
          std::lock_guard<std::mutex> lock(errors_mu);
          ++errors[r.error + (i % 3 == 0 ? " stream" : " plain")];
        }
      });
    for (auto& t : threads) t.join();
    for (int s : status) ++(*statuses)[s];
  };
  std::map<int, int> warm, counts;
  burst(16, &warm);  // the allocator's arenas and the server's threads in place
  const int64_t before = rss_bytes(server->pid());
  burst(200, &counts);
  const int64_t after = rss_bytes(server->pid());
  std::string summary;
  for (auto [s, n] : counts) {
    summary += ' ';
    summary += std::to_string(s);
    summary += ": ";
    summary += std::to_string(n);
  }
  std::string why;
  for (const auto& [e, n] : errors) why += " " + e + " (" + std::to_string(n) + ")";
  EXPECT_EQ(counts[200] + counts[429], 200) << "statuses:" << summary << " (0: no answer:" << why << ")";
  EXPECT_GT(counts[200], 0) << summary;
  EXPECT_GT(counts[429], 0) << "a queue of 2 refuses some of 200 at once:" << summary;
  if (counts[429] > 0) expect_error(refusal, 429, "a refusal of the full queue");
  EXPECT_TRUE(server->running()) << server->log();
  EXPECT_EQ(request(port, "GET", "/health").status, 200);
  EXPECT_EQ(greedy_completion(port, "The cat", 4).size(), 4u);
  const int64_t allowed = std::max<int64_t>(before / 5, 30 << 20);
  EXPECT_LE(after - before, allowed) << "RSS " << before / 1e6 << " MB before the burst, " << after / 1e6 << " after";
  std::printf("[ burst of 200:%s; RSS %.1f -> %.1f MB ]\n", summary.c_str(), before / 1e6, after / 1e6);
  // --max-request-bytes 4096: a body of 5000 bytes is refused, by both APIs.
  const Reply big = post(port, "/v1/completions", {{"prompt", std::string(5000, 'a')}, {"max_tokens", 1}});
  expect_error(big, 413, "5000 bytes over --max-request-bytes 4096");
  EXPECT_NE(big.body.find("4096"), std::string::npos) << big.body;
  EXPECT_EQ(request(port, "PUT", "/api", Json{{"prompts", {std::string(5000, 'a')}}}.dump()).status, 413);
  const int rc = server->stop(SIGTERM);
  EXPECT_EQ(rc, 0) << server->log();
}

}  // namespace bad_input_test
}  // namespace mt::test::serve
