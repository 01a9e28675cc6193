// megatron::Server (include/megatron/serving.h): `megatron serve`'s flags and
// its run. The checkpoint loaded for decoding (decoding/decoding_model.h), the
// batched decoder's pool sized by the flags (model/batched_decoder.h), the
// engine's continuous batching (serve/engine.h) and, on rank 0, the HTTP APIs
// (serve/http_server.h) with the chat template (chat/). Under mpirun the TP/EP
// ranks serve one model; rank 0 speaks HTTP and drives the steps. The binary's
// `serve` (cli/serve_cmd.cc) is a client of it.
#include "megatron/serving.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "args/args_list.h"
#include "args/run_args_check.h"
#include "chat/chat_template.h"
#include "checkpoint/checkpoint_dir.h"
#include "comm/mpi_env.h"
#include "comm/parallel_state.h"
#include "api/job_errors.h"
#include "core/error.h"
#include "decoding/decoding_model.h"
#include "flags/command_words.h"
#include "flags/strict_numbers.h"
#include "model/batched_decoder.h"
#include "serve/engine.h"
#include "serve/http_server.h"

namespace megatron {

namespace {

// Why `megatron serve` refuses these sizes ("": it serves them). `pp`: its
// --pipeline-model-parallel-size (a flag only).
std::string refusal(const ServingOptions& a, int pp) {
  std::ostringstream why;
  if (pp != 1)
    why << "serve does not run pipeline parallelism yet (--pipeline-model-parallel-size " << pp
        << "); fix: serve with --tensor-model-parallel-size (the checkpoint is re-sharded on load) "
           "and PP 1";
  else if (a.port < 0 || a.port > 65535)
    why << "--port " << a.port << " must be in 0..65535 (0: any free one)";
  else if (a.max_requests < 1)
    why << "--inference-max-requests " << a.max_requests << " must be >= 1";
  else if (a.max_seq_length < 2)
    why << "--inference-max-seq-length " << a.max_seq_length << " must be >= 2";
  else if (a.block_size < 1)
    why << "--inference-dynamic-batching-block-size " << a.block_size << " must be >= 1";
  else if (a.max_step_tokens < a.max_requests)
    why << "--inference-dynamic-batching-max-tokens " << a.max_step_tokens
        << " must be >= --inference-max-requests (" << a.max_requests
        << "): a step feeds one token of every running request";
  else if (a.buffer_gb < 0)
    why << "--inference-dynamic-batching-buffer-size-gb " << a.buffer_gb
        << " must be >= 0 (0: room for every request at its longest)";
  else if (a.max_queued < 1)
    why << "--max-queued-requests " << a.max_queued << " must be >= 1";
  else if (a.max_body_bytes < 1024)
    why << "--max-request-bytes " << a.max_body_bytes << " must be >= 1024";
  return why.str();
}

// The decoder's sizes: requests of at most max_seq_length positions (the
// model's context at most), a pool for all of them at their longest unless
// a memory budget says how many tokens.
mt::BatchedDecoderOptions decoder_options(const ServingOptions& a, const mt::ParamRegistry& reg,
                                          int64_t context) {
  mt::BatchedDecoderOptions o;
  o.max_positions = std::min(a.max_seq_length, context);
  o.block_size = std::min(a.block_size, o.max_positions);
  o.max_sequences = a.max_requests;
  o.max_rows = a.max_step_tokens;
  const int64_t per_request = (o.max_positions + o.block_size - 1) / o.block_size * o.block_size;
  o.tokens = a.max_requests * per_request;
  if (a.buffer_gb > 0) {  // bytes per token of the pool, from the closed form
    mt::BatchedDecoderOptions one = o, two = o;
    one.tokens = o.block_size;
    two.tokens = 2 * o.block_size;
    const double per_token = (mt::BatchedDecoder::planned_bytes(reg, two) -
                              mt::BatchedDecoder::planned_bytes(reg, one)) / double(o.block_size);
    o.tokens = int64_t(a.buffer_gb * 1e9 / per_token) / o.block_size * o.block_size;
    MT_CHECK(o.tokens >= per_request, "--inference-dynamic-batching-buffer-size-gb ", a.buffer_gb,
             " holds ", o.tokens, " tokens of key/value cache (", per_token / 1e3,
             " kB each per rank), less than one request of --inference-max-seq-length ",
             o.max_positions, "; fix: a larger budget or a shorter --inference-max-seq-length");
  }
  return o;
}

// The chat template of `path` (a tokenizer_config.json; `given`: named by the
// program, so it must exist), or why there is none.
std::unique_ptr<mt::chat::ChatTemplate> chat_template(const std::string& path, bool given,
                                                      std::string& why) {
  if (!std::filesystem::exists(path)) {
    MT_CHECK(!given, "serve: the chat template file ", path, " does not exist; fix: point "
             "ServingOptions::chat_template_file to a tokenizer_config.json");
    why = "the checkpoint's tokenizer has no tokenizer_config.json (only Hugging Face "
          "tokenizers carry a chat template)";
    return nullptr;
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("chat_template")) {
    why = path + " has no chat_template";
    return nullptr;
  }
  try {
    return std::make_unique<mt::chat::ChatTemplate>(
        mt::chat::ChatTemplate::from_tokenizer_config(text.str()));
  } catch (const mt::chat::TemplateError& e) {
    MT_FAIL("serve: the chat template of ", path, " cannot be served: ", e.what(),
            "; fix: edit its chat_template, or remove it to serve completions only");
  }
}

// The checkpoint's tokenizer_config.json (where its chat template would be).
std::string checkpoint_tokenizer_config(const std::string& load) {
  const nlohmann::json meta = mt::read_checkpoint_meta(load);
  return mt::checkpoint_iteration_dir(load, meta.at("iteration").get<int64_t>()) +
         "/tokenizer/tokenizer_config.json";
}

// `megatron serve`'s flags on `app`, into `o` (the layout into `layout`).
void add_serve_flags(CLI::App& app, ServingOptions& o, mt::DecodingLayout& layout, int& pp) {
  app.add_option("--load", o.load, "checkpoint directory (a --save of megatron train, or convert's)")
      ->required();
  app.add_option("--host", o.host, "address to listen on (0.0.0.0: every interface)");
  app.add_option("--port", o.port, "port to listen on (0: any free one, said on stderr)");
  mt::add_decoding_layout_options(app, layout,
                                  "TP size to serve with (launch that many ranks with mpirun); "
                                  "the checkpoint is re-sharded if it was saved with another");
  app.add_option("--pipeline-model-parallel-size", pp, "must be 1: serving with PP is not built yet");
  app.add_option("--inference-max-requests", o.max_requests, "requests decoded at once");
  app.add_option("--inference-max-seq-length", o.max_seq_length,
                 "prompt + new tokens of one request, at most (capped at the model's context)");
  app.add_option("--inference-dynamic-batching-buffer-size-gb", o.buffer_gb,
                 "memory of the key/value cache pool per rank, GB (default: room for "
                 "--inference-max-requests requests of --inference-max-seq-length)");
  app.add_option("--inference-dynamic-batching-block-size", o.block_size,
                 "positions per key/value cache block");
  app.add_option("--inference-dynamic-batching-max-tokens", o.max_step_tokens,
                 "tokens fed per step: one per generating request, the rest prompt chunks");
  app.add_option("--max-queued-requests", o.max_queued,
                 "requests waiting for room, at most; more are answered 429");
  app.add_option("--max-request-bytes", o.max_body_bytes,
                 "largest request body; larger ones are answered 413");
  app.add_option("--served-model-name", o.model_name,
                 "the model's name in the API (default: the --load folder's name)");
  app.add_flag("--skip-memory-check", o.skip_memory_check,
               "allocate even if weights and key/value cache exceed the host's available memory");
  mt::make_integer_options_strict(app);
}


}  // namespace

struct Server::Impl {
  ServingOptions o;
  int pp = 1;              // the words' --pipeline-model-parallel-size
  bool started = false, finished = false;
  sigset_t stop_signals;   // SIGINT, SIGTERM (with o.stop_on_signals)
  // Declared in the order they are built: let go in reverse.
  std::unique_ptr<mt::MpiEnv> mpi;
  std::unique_ptr<mt::ParallelState> ps;
  mt::DecodingModel model;
  std::unique_ptr<mt::BatchedDecoder> dec;
  std::unique_ptr<mt::chat::ChatTemplate> chat;
  std::string why_no_chat;
  std::unique_ptr<mt::serve::Engine> engine;
  mt::serve::ServedModel served;        // rank 0's
  std::unique_ptr<mt::serve::HttpServer> http;  // rank 0's
  int port = 0;
  // stop() against start() and run() building and letting go of the above.
  std::mutex stop_m;
  bool stop_asked = false;

  // Everything but MPI let go, the HTTP server first (as unwinding did).
  void drop() {
    std::lock_guard<std::mutex> lock(stop_m);
    http.reset();
    engine.reset();
    chat.reset();
    dec.reset();
    model = mt::DecodingModel();
    ps.reset();
  }
};

Server::Server(const ServingOptions& options) : impl_(std::make_unique<Impl>()) {
  const std::string why = refusal(options, 1);
  if (!why.empty()) throw std::invalid_argument(why);
  if (options.load.empty())
    throw std::invalid_argument("ServingOptions::load: the checkpoint directory is empty");
  if (options.tensor_parallel < 1 || options.expert_parallel < 1)
    throw std::invalid_argument("--tensor-model-parallel-size " +
                                std::to_string(options.tensor_parallel) +
                                " and --expert-model-parallel-size " +
                                std::to_string(options.expert_parallel) + " must be >= 1");
  impl_->o = options;
}

Server::Server(const std::vector<std::string>& flags) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  CLI::App app{"megatron.cpp as a library: megatron serve"};
  app.require_subcommand(1);
  CLI::App* serve = app.add_subcommand(
      "serve", "Megatron's text generation API and an OpenAI-compatible one over a checkpoint");
  mt::DecodingLayout layout;
  add_serve_flags(*serve, s.o, layout, s.pp);
  mt::parse_command_words(app, *serve, flags);
  s.o.tensor_parallel = layout.tp;
  s.o.expert_parallel = layout.ep;
}

Server::~Server() = default;

void Server::start() {
  Impl& s = *impl_;
  if (s.started) throw std::logic_error("megatron::Server::start() twice");
  s.started = true;
  mt::ending_job_on_error([&] {
    const ServingOptions& a = s.o;
    const std::string why = refusal(a, s.pp);
    MT_CHECK(why.empty(), why);
    // SIGINT/SIGTERM end the server through rank 0 (sigwait in run()), on
    // every thread, including the ones MPI starts: blocked before MPI.
    sigemptyset(&s.stop_signals);
    sigaddset(&s.stop_signals, SIGINT);
    sigaddset(&s.stop_signals, SIGTERM);
    if (a.stop_on_signals) pthread_sigmask(SIG_BLOCK, &s.stop_signals, nullptr);
    s.mpi = std::make_unique<mt::MpiEnv>();
    mt::DecodingLayout layout;
    layout.tp = a.tensor_parallel;
    layout.ep = a.expert_parallel;
    s.ps = std::make_unique<mt::ParallelState>(
        mt::decoding_parallel_config(layout, s.mpi->world_size(), "serve"));
    const mt::ParallelState& ps = *s.ps;
    mt::check_same_arguments(
        {{"--load", a.load},
         {"--inference-max-requests", std::to_string(a.max_requests)},
         {"--inference-max-seq-length", std::to_string(a.max_seq_length)},
         {"--inference-dynamic-batching-block-size", std::to_string(a.block_size)},
         {"--inference-dynamic-batching-max-tokens", std::to_string(a.max_step_tokens)},
         {"--inference-dynamic-batching-buffer-size-gb", mt::arg_value_text(a.buffer_gb)}},
        ps.world_comm);
    s.model = mt::open_for_decoding(a.load, ps, "serve");
    mt::DecodingModel& model = s.model;
    const mt::BatchedDecoderOptions opt = decoder_options(a, *model.reg, model.context());
    const bool own_chat = !a.chat_template_file.empty();
    s.chat = chat_template(own_chat ? a.chat_template_file : checkpoint_tokenizer_config(a.load),
                           own_chat, s.why_no_chat);
    const int64_t tokens = (opt.tokens + opt.block_size - 1) / opt.block_size * opt.block_size;
    mt::load_weights(model, ps, mt::BatchedDecoder::planned_bytes(*model.reg, opt),
                     "key/value cache of " + std::to_string(tokens) + " tokens (" +
                         std::to_string(tokens / opt.block_size) + " blocks of " +
                         std::to_string(opt.block_size) + "): " + std::to_string(opt.max_sequences) +
                         " requests at once of up to " + std::to_string(opt.max_positions) +
                         " tokens each (the model's context: " + std::to_string(model.context()) +
                         "), and the scratch of a step of " + std::to_string(opt.max_rows) +
                         " tokens (their logits)",
                     "lower --inference-max-requests or --inference-max-seq-length, or set "
                     "--inference-dynamic-batching-buffer-size-gb; or pass --skip-memory-check",
                     a.skip_memory_check);
    s.dec = std::make_unique<mt::BatchedDecoder>(
        *model.reg, reinterpret_cast<const float*>(model.params.data()), opt,
        mt::TensorParallel{&s.ps->tp_comm, false}, ps.ep_size > 1 ? &s.ps->ep_comm : nullptr);
    {
      std::lock_guard<std::mutex> lock(s.stop_m);
      s.engine = std::make_unique<mt::serve::Engine>(*s.dec, s.ps->world_comm, a.max_queued);
      if (s.stop_asked) s.engine->stop();
    }
    if (ps.world_rank != 0) return;
    mt::serve::ServedModel& served = s.served;
    served.tok = model.tok.get();
    served.name = a.model_name;
    if (served.name.empty()) {
      std::filesystem::path p(a.load);
      served.name = (p.has_filename() ? p : p.parent_path()).filename().string();
    }
    served.max_length = opt.max_positions;
    served.created = int64_t(std::time(nullptr));
    served.chat = s.chat.get();
    served.no_chat = s.why_no_chat;
    if (s.chat) {
      const std::vector<int32_t> eos = model.tok->tokenize(s.chat->eos_token());
      if (eos.size() == 1) served.chat_stop_ids = eos;
    }
    mt::serve::ServerOptions so;
    so.host = a.host;
    so.port = a.port;
    so.max_body_bytes = a.max_body_bytes;
    so.threads = int(std::max<int64_t>(32, a.max_requests + a.max_queued + 16));
    auto http = std::make_unique<mt::serve::HttpServer>(*s.engine, served, so);
    s.port = http->bind();
    {
      std::lock_guard<std::mutex> lock(s.stop_m);
      s.http = std::move(http);
    }
    std::fprintf(stderr, "serve: listening on http://%s:%d (model %s; %s; chat %s)\n",
                 a.host.c_str(), s.port, served.name.c_str(), ps.layout().c_str(),
                 s.chat ? "on" : "off: no template");
  });
}

int Server::port() const {
  if (!impl_->started) throw std::logic_error("megatron::Server::port() before start()");
  return impl_->port;
}

void Server::stop() {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> lock(s.stop_m);
  s.stop_asked = true;
  // The engine first: the requests in flight are answered (503) and their
  // connection threads return, which the HTTP server waits for.
  if (s.engine) s.engine->stop();
  if (s.http) s.http->stop();
}

int Server::run() {
  Impl& s = *impl_;
  if (s.finished) throw std::logic_error("megatron::Server::run() twice");
  if (!s.started) start();
  s.finished = true;
  mt::ending_job_on_error([&] {
    if (s.ps->world_rank != 0) {
      s.engine->follow();
    } else {
      std::atomic<bool> listening{true};
      std::thread listener([&] {
        s.http->run();  // until stopped (or the socket failed)
        s.engine->stop();
        listening = false;
      });
      std::atomic<bool> ending{false};
      std::thread stopper;
      if (s.o.stop_on_signals)
        stopper = std::thread([&] {
          int sig = 0;
          sigwait(&s.stop_signals, &sig);
          if (!ending)
            std::fprintf(stderr, "serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
          stop();
        });
      s.engine->serve();  // until stopped: this thread makes every MPI call
      ending = true;
      if (stopper.joinable()) pthread_kill(stopper.native_handle(), SIGTERM);  // wakes it
      // A stop() before the listener was listening did not reach it: again until it ends.
      while (listening) {
        s.http->stop();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      listener.join();
      if (stopper.joinable()) stopper.join();
    }
    s.drop();
    s.mpi->finalize();
  });
  return 0;
}

}  // namespace megatron
