#include "serve/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include "core/error.h"
#include "serve/api_error.h"
#include "serve/completion_runner.h"
#include "serve/megatron_api.h"

namespace mt::serve {

namespace {

std::string dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

void send_json(httplib::Response& res, int status, const Json& j) {
  res.status = status;
  res.set_content(dump(j) + "\n", "application/json");
}

// The body as JSON, or a 400 (malformed) naming where it broke.
Json parse_body(const httplib::Request& req) {
  try {
    return Json::parse(req.body);
  } catch (const Json::parse_error& e) {
    throw ApiError(400, std::string("The request body is not valid JSON: ") + e.what());
  }
}

std::vector<std::shared_ptr<RequestStream>> make_streams(std::vector<GenerationParams> params) {
  std::vector<std::shared_ptr<RequestStream>> s;
  for (auto& p : params) s.push_back(std::make_shared<RequestStream>(std::move(p)));
  return s;
}

void submit(Engine& engine, const std::vector<std::shared_ptr<RequestStream>>& s) {
  switch (engine.submit(s)) {
    case Admission::kQueued: return;
    case Admission::kQueueFull:
      throw ApiError(429, "The server's queue is full (--max-queued-requests); retry later.", "",
                     "rate_limit_exceeded", "rate_limit_exceeded");
    case Admission::kStopping:
      throw ApiError(503, "The server is shutting down.", "", "server_error", "service_unavailable");
  }
}

}  // namespace

HttpServer::HttpServer(Engine& engine, const ServedModel& model, const ServerOptions& options)
    : engine_(engine), model_(model), opt_(options), http_(std::make_unique<httplib::Server>()) {
  const int threads = opt_.threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  http_->set_payload_max_length(size_t(opt_.max_body_bytes));
  routes();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  // cpp-httplib 0.11 listens with a backlog of 5 (compiled into Debian's
  // library): a burst of connections overflows it, and the kernel drops some
  // that their clients already think open (tests/serve's burst of 200 saw ~40%
  // closed unanswered). Its socket-options hook hands over the listening
  // socket: listen again, with the system's limit, once it is bound.
  int listener = -1;
  http_->set_socket_options([&listener](socket_t sock) {
    httplib::default_socket_options(sock);
    listener = int(sock);
  });
  const int port = opt_.port == 0 ? http_->bind_to_any_port(opt_.host)
                                  : (http_->bind_to_port(opt_.host, opt_.port) ? opt_.port : -1);
  http_->set_socket_options(httplib::default_socket_options);
  MT_CHECK(port > 0, "serve: cannot listen on ", opt_.host, ":", opt_.port,
           " (in use, or not an address of this host); fix: another --port (0: any free one) "
           "or --host");
  MT_CHECK(listener >= 0 && ::listen(listener, SOMAXCONN) == 0,
           "serve: cannot raise the listen backlog of ", opt_.host, ":", port);
  return port;
}

void HttpServer::run() { http_->listen_after_bind(); }
void HttpServer::stop() { http_->stop(); }

void HttpServer::routes() {
  httplib::Server& s = *http_;
  // Every refusal of the OpenAI routes: its error object.
  const auto openai = [this](auto handle) {
    return [this, handle](const httplib::Request& req, httplib::Response& res) {
      try {
        handle(req, res);
      } catch (const ApiError& e) {
        send_json(res, e.status, e.body());
      }
    };
  };
  const auto completions = [this](bool chat) {
    return [this, chat](const httplib::Request& req, httplib::Response& res) {
      const Json body = parse_body(req);
      CompletionJob job = chat ? parse_chat(body, model_) : parse_completion(body, model_);
      auto streams = make_streams(job.params);
      submit(engine_, streams);
      auto run = std::make_shared<CompletionRun>(std::move(job), model_, streams);
      const bool stream = !body.is_null() && body.value("stream", false);
      if (!stream) {
        try {
          send_json(res, 200, run->whole());
        } catch (...) {
          run->cancel();
          throw;
        }
        return;
      }
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [run](size_t, httplib::DataSink& sink) {
            const std::string events = run->next_events(std::chrono::milliseconds(100));
            // A client gone: a write fails; its generations end, their blocks free.
            if (!sink.is_writable() || (!events.empty() && !sink.write(events.data(), events.size()))) {
              run->cancel();
              return false;
            }
            if (run->done()) sink.done();
            return true;
          },
          [run](bool) { run->cancel(); });  // ended either way: nothing more to make
    };
  };
  s.Post("/v1/completions", openai(completions(false)));
  s.Post("/completions", openai(completions(false)));
  s.Post("/v1/chat/completions", openai(completions(true)));
  s.Post("/chat/completions", openai(completions(true)));
  s.Put("/api", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      Json body;
      try {
        body = Json::parse(req.body);
      } catch (const Json::parse_error&) {
        throw ApiError(400, "prompts argument required");  // Flask's get_json() fails alike
      }
      MegatronJob job = parse_megatron(body, model_);
      auto streams = make_streams(job.params);
      submit(engine_, streams);
      try {
        send_json(res, 200, megatron_response(job, model_, streams));
      } catch (...) {
        for (auto& st : streams) st->cancel();
        throw;
      }
    } catch (const ApiError& e) {
      send_json(res, e.status, Json(e.what()));
    }
  });
  const auto models = [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"object", "list"},
                         {"data", Json::array({{{"id", model_.name},
                                                {"object", "model"},
                                                {"created", model_.created},
                                                {"owned_by", "megatron.cpp"},
                                                {"max_model_len", model_.max_length}}})}});
  };
  s.Get("/v1/models", models);
  const auto health = [this](const httplib::Request&, httplib::Response& res) {
    const Engine::Load l = engine_.load();
    send_json(res, 200, {{"status", "ok"}, {"service", "megatron.cpp"}, {"ready", true},
                         {"running", l.running}, {"queued", l.queued}});
  };
  s.Get("/v1/health", health);
  s.Get("/health", health);
  // What the routes did not answer: 404, 413 (body too large), or a handler's exception.
  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413)
      send_json(res, 413, ApiError(413, "The request body is larger than the server's limit of " +
                                            std::to_string(opt_.max_body_bytes) +
                                            " bytes (--max-request-bytes).").body());
    else if (res.status == 404 || res.status == 405)
      send_json(res, res.status, ApiError(res.status, "No route " + req.method + " " + req.path +
                                                          "; see /v1/models, /v1/completions, "
                                                          "/v1/chat/completions, PUT /api").body());
    else
      send_json(res, res.status, ApiError(res.status, "HTTP status " + std::to_string(res.status),
                                          "", "server_error").body());
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_json(res, 500, ApiError(500, "Internal error: " + what, "", "server_error").body());
  });
}

}  // namespace mt::serve
