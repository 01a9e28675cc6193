// The HTTP side of `megatron serve` (cpp-httplib, Debian's libcpp-httplib):
// rank 0's routes, each request parsed on its own connection thread, handed
// to the engine (serve/engine.h) and answered when its generations end, or
// streamed as they go.
//   PUT  /api                     Megatron's (serve/megatron_api.h)
//   POST /v1/completions          OpenAI's (serve/openai_api.h); also /completions
//   POST /v1/chat/completions     also /chat/completions
//   GET  /v1/models, /v1/health   also /health
// Refusals are OpenAI error objects with their status: 400 malformed, 404
// no such path, 413 a body over --max-request-bytes, 429 the queue full, 503
// stopping; PUT /api's are Megatron's messages as JSON strings.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "serve/engine.h"
#include "serve/openai_api.h"

namespace httplib {
class Server;
}

namespace mt::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 5000;                  // 0: a free one
  int64_t max_body_bytes = 8 << 20;
  int threads = 64;                 // connections served at once
};

class HttpServer {
 public:
  HttpServer(Engine& engine, const ServedModel& model, const ServerOptions& options);
  ~HttpServer();
  // Binds the socket (throws naming host and port); returns the port.
  int bind();
  // Serves until stop() (blocks; run it on its own thread).
  void run();
  void stop();

 private:
  void routes();
  Engine& engine_;
  const ServedModel& model_;
  ServerOptions opt_;
  std::unique_ptr<httplib::Server> http_;
};

}  // namespace mt::serve
