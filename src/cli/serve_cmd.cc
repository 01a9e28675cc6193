// `megatron serve`: a checkpoint behind Megatron's text generation API and
// OpenAI's (serve/http_server.h), continuous batching over a paged key/value
// cache (serve/engine.h). Under mpirun the TP/EP ranks serve one model; rank
// 0 speaks HTTP and drives the steps.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "checkpoint/checkpoint_dir.h"
#include "chat/chat_template.h"
#include "cli/commands.h"
#include "decoding/decoding_model.h"
#include "flags/strict_numbers.h"
#include "comm/mpi_env.h"
#include "comm/parallel_state.h"
#include "core/error.h"
#include "model/batched_decoder.h"
#include "serve/engine.h"
#include "serve/http_server.h"
#include "args/run_args_check.h"

namespace mt {

namespace {
struct ServeArgs {
  std::string load, host = "127.0.0.1", model_name;
  int port = 5000, pp = 1;
  DecodingLayout layout;
  int64_t max_requests = 8, max_seq_length = 2560, block_size = 256, max_step_tokens = 256;
  double buffer_gb = 0;  // 0: every request at its longest
  int64_t max_queued = 64, max_body_bytes = 8 << 20;
  bool skip_memory_check = false;
};

void check_serve_args(const ServeArgs& a) {
  MT_CHECK(a.pp == 1, "serve does not run pipeline parallelism yet (--pipeline-model-parallel-size ",
           a.pp, "); fix: serve with --tensor-model-parallel-size (the checkpoint is re-sharded "
           "on load) and PP 1");
  MT_CHECK(a.port >= 0 && a.port <= 65535, "--port ", a.port, " must be in 0..65535 (0: any free one)");
  MT_CHECK(a.max_requests >= 1, "--inference-max-requests ", a.max_requests, " must be >= 1");
  MT_CHECK(a.max_seq_length >= 2, "--inference-max-seq-length ", a.max_seq_length, " must be >= 2");
  MT_CHECK(a.block_size >= 1, "--inference-dynamic-batching-block-size ", a.block_size, " must be >= 1");
  MT_CHECK(a.max_step_tokens >= a.max_requests, "--inference-dynamic-batching-max-tokens ",
           a.max_step_tokens, " must be >= --inference-max-requests (", a.max_requests,
           "): a step feeds one token of every running request");
  MT_CHECK(a.buffer_gb >= 0, "--inference-dynamic-batching-buffer-size-gb ", a.buffer_gb,
           " must be >= 0 (0: room for every request at its longest)");
  MT_CHECK(a.max_queued >= 1, "--max-queued-requests ", a.max_queued, " must be >= 1");
  MT_CHECK(a.max_body_bytes >= 1024, "--max-request-bytes ", a.max_body_bytes, " must be >= 1024");
}

// The decoder's sizes: requests of at most max_seq_length positions (the
// model's context at most), a pool for all of them at their longest unless
// a memory budget says how many tokens.
BatchedDecoderOptions decoder_options(const ServeArgs& a, const ParamRegistry& reg, int64_t context) {
  BatchedDecoderOptions o;
  o.max_positions = std::min(a.max_seq_length, context);
  o.block_size = std::min(a.block_size, o.max_positions);
  o.max_sequences = a.max_requests;
  o.max_rows = a.max_step_tokens;
  const int64_t per_request = (o.max_positions + o.block_size - 1) / o.block_size * o.block_size;
  o.tokens = a.max_requests * per_request;
  if (a.buffer_gb > 0) {  // bytes per token of the pool, from the closed form
    BatchedDecoderOptions one = o, two = o;
    one.tokens = o.block_size;
    two.tokens = 2 * o.block_size;
    const double per_token = (BatchedDecoder::planned_bytes(reg, two) -
                              BatchedDecoder::planned_bytes(reg, one)) / double(o.block_size);
    o.tokens = int64_t(a.buffer_gb * 1e9 / per_token) / o.block_size * o.block_size;
    MT_CHECK(o.tokens >= per_request, "--inference-dynamic-batching-buffer-size-gb ", a.buffer_gb,
             " holds ", o.tokens, " tokens of key/value cache (", per_token / 1e3,
             " kB each per rank), less than one request of --inference-max-seq-length ",
             o.max_positions, "; fix: a larger budget or a shorter --inference-max-seq-length");
  }
  return o;
}

// The checkpoint's chat template (its tokenizer_config.json), or why there is none.
std::unique_ptr<chat::ChatTemplate> chat_template(const std::string& load, std::string& why) {
  const nlohmann::json meta = read_checkpoint_meta(load);
  const std::string path = checkpoint_iteration_dir(load, meta.at("iteration").get<int64_t>()) +
                           "/tokenizer/tokenizer_config.json";
  if (!std::filesystem::exists(path)) {
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
    return std::make_unique<chat::ChatTemplate>(chat::ChatTemplate::from_tokenizer_config(text.str()));
  } catch (const chat::TemplateError& e) {
    MT_FAIL("serve: the chat template of ", path, " cannot be served: ", e.what(),
            "; fix: edit its chat_template, or remove it to serve completions only");
  }
}
}  // namespace

Command add_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  app.add_option("--load", a->load, "checkpoint directory (a --save of megatron train, or convert's)")
      ->required();
  app.add_option("--host", a->host, "address to listen on (0.0.0.0: every interface)");
  app.add_option("--port", a->port, "port to listen on (0: any free one, said on stderr)");
  add_decoding_layout_options(app, a->layout,
                              "TP size to serve with (launch that many ranks with mpirun); the "
                              "checkpoint is re-sharded if it was saved with another");
  app.add_option("--pipeline-model-parallel-size", a->pp, "must be 1: serving with PP is not built yet");
  app.add_option("--inference-max-requests", a->max_requests, "requests decoded at once");
  app.add_option("--inference-max-seq-length", a->max_seq_length,
                 "prompt + new tokens of one request, at most (capped at the model's context)");
  app.add_option("--inference-dynamic-batching-buffer-size-gb", a->buffer_gb,
                 "memory of the key/value cache pool per rank, GB (default: room for "
                 "--inference-max-requests requests of --inference-max-seq-length)");
  app.add_option("--inference-dynamic-batching-block-size", a->block_size,
                 "positions per key/value cache block");
  app.add_option("--inference-dynamic-batching-max-tokens", a->max_step_tokens,
                 "tokens fed per step: one per generating request, the rest prompt chunks");
  app.add_option("--max-queued-requests", a->max_queued,
                 "requests waiting for room, at most; more are answered 429");
  app.add_option("--max-request-bytes", a->max_body_bytes,
                 "largest request body; larger ones are answered 413");
  app.add_option("--served-model-name", a->model_name,
                 "the model's name in the API (default: the --load folder's name)");
  app.add_flag("--skip-memory-check", a->skip_memory_check,
               "allocate even if weights and key/value cache exceed the host's available memory");
  make_integer_options_strict(app);
  return [a]() {
    check_serve_args(*a);
    // SIGINT/SIGTERM end the server through rank 0 (sigwait below), on
    // every thread, including the ones MPI starts: blocked before MPI.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    MpiEnv mpi;
    ParallelState ps(decoding_parallel_config(a->layout, mpi.world_size(), "serve"));
    check_same_arguments({{"--load", a->load},
                          {"--inference-max-requests", std::to_string(a->max_requests)},
                          {"--inference-max-seq-length", std::to_string(a->max_seq_length)},
                          {"--inference-dynamic-batching-block-size", std::to_string(a->block_size)},
                          {"--inference-dynamic-batching-max-tokens", std::to_string(a->max_step_tokens)},
                          {"--inference-dynamic-batching-buffer-size-gb", arg_value_text(a->buffer_gb)}},
                         ps.world_comm);
    const bool rank0 = ps.world_rank == 0;
    DecodingModel model = open_for_decoding(a->load, ps, "serve");
    const BatchedDecoderOptions opt = decoder_options(*a, *model.reg, model.context());
    std::string why_no_chat;
    std::unique_ptr<chat::ChatTemplate> chat = chat_template(a->load, why_no_chat);
    const int64_t tokens = (opt.tokens + opt.block_size - 1) / opt.block_size * opt.block_size;
    load_weights(model, ps, BatchedDecoder::planned_bytes(*model.reg, opt),
                 "key/value cache of " + std::to_string(tokens) + " tokens (" +
                     std::to_string(tokens / opt.block_size) + " blocks of " +
                     std::to_string(opt.block_size) + "): " + std::to_string(opt.max_sequences) +
                     " requests at once of up to " + std::to_string(opt.max_positions) +
                     " tokens each (the model's context: " + std::to_string(model.context()) +
                     "), and the scratch of a step of " + std::to_string(opt.max_rows) +
                     " tokens (their logits)",
                 "lower --inference-max-requests or --inference-max-seq-length, or set "
                 "--inference-dynamic-batching-buffer-size-gb; or pass --skip-memory-check",
                 a->skip_memory_check);
    BatchedDecoder dec(*model.reg, reinterpret_cast<const float*>(model.params.data()), opt,
                       TensorParallel{&ps.tp_comm, false}, ps.ep_size > 1 ? &ps.ep_comm : nullptr);
    serve::Engine engine(dec, ps.world_comm, a->max_queued);
    if (!rank0) {
      engine.follow();
      return 0;
    }
    serve::ServedModel served;
    served.tok = model.tok.get();
    served.name = a->model_name;
    if (served.name.empty()) {
      std::filesystem::path p(a->load);
      served.name = (p.has_filename() ? p : p.parent_path()).filename().string();
    }
    served.max_length = opt.max_positions;
    served.created = int64_t(std::time(nullptr));
    served.chat = chat.get();
    served.no_chat = why_no_chat;
    if (chat) {
      const std::vector<int32_t> eos = model.tok->tokenize(chat->eos_token());
      if (eos.size() == 1) served.chat_stop_ids = eos;
    }
    serve::ServerOptions so;
    so.host = a->host;
    so.port = a->port;
    so.max_body_bytes = a->max_body_bytes;
    so.threads = int(std::max<int64_t>(32, a->max_requests + a->max_queued + 16));
    serve::HttpServer http(engine, served, so);
    const int port = http.bind();
    std::fprintf(stderr, "serve: listening on http://%s:%d (model %s; %s; chat %s)\n",
                 a->host.c_str(), port, served.name.c_str(), ps.layout().c_str(),
                 chat ? "on" : "off: no template");
    std::atomic<bool> ending{false};
    std::thread listener([&] {
      http.run();  // until stopped (or the socket failed)
      engine.stop();
    });
    std::thread stopper([&] {
      int sig = 0;
      sigwait(&stop_signals, &sig);
      if (!ending) std::fprintf(stderr, "serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
      // The engine first: the requests in flight are answered (503) and
      // their connection threads return, which the HTTP server waits for.
      engine.stop();
      http.stop();
    });
    engine.serve();  // until stopped: this thread makes every MPI call
    ending = true;
    pthread_kill(stopper.native_handle(), SIGTERM);  // wakes it if no signal came
    listener.join();
    stopper.join();
    return 0;
  };
}

}  // namespace mt
