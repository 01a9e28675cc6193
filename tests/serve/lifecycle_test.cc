// Starting and stopping `megatron serve`: --port 0 binds a free port (two
// servers side by side get two), SIGINT and SIGTERM end it with exit 0, also
// while a stream is being answered.
#include "serve/serve_test_util.h"

namespace mt::test::serve {
namespace lifecycle_test {

TEST(ServeLifecycle, PortZeroBindsAFreePortAndSignalsEndItWithExitZero) {
  TempDir dir;
  const std::string ckpt = char_checkpoint();
  ASSERT_FALSE(ckpt.empty());
  auto a = start_server(ckpt, "", dir);
  auto b = start_server(ckpt, "", dir);
  ASSERT_GT(a->port(), 0);
  ASSERT_GT(b->port(), 0);
  EXPECT_NE(a->port(), b->port());
  for (Server* s : {a.get(), b.get()}) EXPECT_EQ(request(s->port(), "GET", "/v1/health").status, 200);
  EXPECT_EQ(a->stop(SIGINT), 0) << "SIGINT:\n" << a->log();
  EXPECT_EQ(request(b->port(), "GET", "/health").status, 200) << "the other server is untouched";

  // SIGTERM while a stream is under way: the server still ends, exit 0.
  std::thread client([&] {
    post(b->port(), "/v1/completions", {{"prompt", "A dog"}, {"max_tokens", 50}, {"stream", true}}, 60);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(b->stop(SIGTERM), 0) << "SIGTERM during a stream:\n" << b->log();
  client.join();
}

// SIGTERM with requests running and queued (long ones, on the slower
// model): the server ends with exit 0 within seconds, and every client gets
// its answer or its connection closed, none is left waiting.
TEST(ServeLifecycle, SigtermWithAFullQueueEndsPromptlyAndLeavesNoClientWaiting) {
  TempDir dir;
  const std::string ckpt = wide_checkpoint();
  ASSERT_FALSE(ckpt.empty());
  auto server = start_server(ckpt, "--inference-max-requests 2 --max-queued-requests 16", dir);
  const int port = server->port();
  ASSERT_GT(port, 0);
  constexpr int kClients = 10;
  std::vector<int> status(kClients, -1);
  std::vector<double> seconds(kClients, 0);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&, i] {
      const auto t0 = std::chrono::steady_clock::now();
      status[size_t(i)] = post(port, "/v1/completions",
                               {{"prompt", "A dog"}, {"max_tokens", 900}, {"temperature", 0}, {"stream", i % 2 == 0}}, 60)
                              .status;
      seconds[size_t(i)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(server->stop(SIGTERM, 30), 0) << server->log();
  const double stop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto& t : clients) t.join();
  std::string summary;
  for (int i = 0; i < kClients; ++i) {
    summary += ' ';
    summary += std::to_string(status[size_t(i)]);
    EXPECT_LT(seconds[size_t(i)], 45) << "client " << i << " waited until its timeout";
    EXPECT_TRUE(status[size_t(i)] == 200 || status[size_t(i)] == 503 || status[size_t(i)] == 0)
        << "client " << i << ": " << status[size_t(i)];
  }
  EXPECT_LT(stop_s, 10) << "SIGTERM took " << stop_s << " s";
  std::printf("[ stopped in %.2f s; statuses:%s ]\n", stop_s, summary.c_str());
}

}  // namespace lifecycle_test
}  // namespace mt::test::serve
