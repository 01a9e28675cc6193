// Starting and stopping `megatron serve`: --port 0 binds a free port (two
// servers side by side get two), SIGINT and SIGTERM end it with exit 0, also
// while a stream is being answered.
#include "serve/serve_test_util.h"

namespace mt::test::serve {
namespace {

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

}  // namespace
}  // namespace mt::test::serve
