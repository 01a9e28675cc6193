// megatron/serving.h — `megatron serve` as a library call: a checkpoint
// behind Megatron's text generation API and OpenAI's, over HTTP.
//
// A Server loads a checkpoint (a --save directory of `megatron train`, or one
// `megatron convert` wrote) with its own tokenizer, split over the MPI world
// as `serve` splits it (TP ranks share each layer, EP ranks split an MoE
// model's experts: the world is lcm(TP, EP) ranks), and answers
//   PUT  /api                     Megatron's text generation API
//   POST /v1/completions          OpenAI's (also /completions)
//   POST /v1/chat/completions     with the checkpoint's chat template
//   GET  /v1/models, /v1/health   (also /health)
// with continuous batching over a paged key/value cache: every request samples
// from its own stream (its seed), so a greedy completion is what
// megatron::DecodingSession::generate (megatron/decoding.h) and `megatron
// generate` give for its prompt. Rank 0 speaks HTTP and drives the steps; the
// other ranks replay them.
//
// MPI: start() initialises MPI unless the program has (MPI_THREAD_FUNNELED:
// call start() and run() on the thread that initialised it), and run()
// finalises it at its end if start() initialised it (so a process runs one
// Server unless it initialises MPI itself).
//
// Signals (ServingOptions::stop_on_signals, as `megatron serve`): start()
// blocks SIGINT and SIGTERM in the calling thread, so in the threads it and
// MPI start after it (call it before the program starts other threads, for
// the process's signals to reach the server), and either signal then ends
// run() as stop() does ("serve: SIGTERM, stopping" on stderr). They stay
// blocked after run(), so that a second one during the shutdown does not kill
// the process; a program that wants them back unblocks them.
//
//   megatron::Server server({.load = "ckpt", .port = 0});
//   server.start();                       // loads; rank 0 listens
//   std::printf("port %d\n", server.port());
//   std::thread t([&] { /* ... HTTP to 127.0.0.1:port ... */ server.stop(); });
//   server.run();                         // until stop() or SIGINT / SIGTERM
//   t.join();
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "megatron/flags.h"

namespace megatron {

// What `megatron serve`'s flags set (each field names its flag).
struct ServingOptions {
  std::string load;                  // --load: the checkpoint directory
  std::string host = "127.0.0.1";    // --host: the address to listen on (0.0.0.0: every interface)
  int port = 5000;                   // --port: 0..65535; 0: any free one (Server::port())
  int tensor_parallel = 1;           // --tensor-model-parallel-size (the checkpoint is re-sharded)
  int expert_parallel = 1;           // --expert-model-parallel-size (MoE)
  int64_t max_requests = 8;          // --inference-max-requests: requests decoded at once
  int64_t max_seq_length = 2560;     // --inference-max-seq-length: prompt + new tokens, at most
                                     //   (capped at the model's context)
  double buffer_gb = 0;              // --inference-dynamic-batching-buffer-size-gb: the key/value
                                     //   cache pool per rank (0: every request at its longest)
  int64_t block_size = 256;          // --inference-dynamic-batching-block-size: positions per block
  int64_t max_step_tokens = 256;     // --inference-dynamic-batching-max-tokens: tokens per step
                                     //   (>= max_requests)
  int64_t max_queued = 64;           // --max-queued-requests: more waiting are answered 429
  int64_t max_body_bytes = 8 << 20;  // --max-request-bytes: larger bodies are answered 413
  std::string model_name;            // --served-model-name ("": the --load folder's name)
  bool skip_memory_check = false;    // --skip-memory-check: allocate past the available memory
  // A tokenizer_config.json whose chat_template /v1/chat/completions renders
  // ("": the checkpoint tokenizer's, as `megatron serve`; none: chat refused).
  std::string chat_template_file;
  // SIGINT and SIGTERM end run() (above); false: only stop() does.
  bool stop_on_signals = true;
};

class Server {
 public:
  // Throws std::invalid_argument for options out of range (the message names
  // the flag, as `megatron serve` refuses it).
  explicit Server(const ServingOptions& options);
  // `flags`: the words after `megatron serve`. Throws FlagError (FlagHelp for
  // --help). Values out of range end the job at start(), as the command does.
  explicit Server(const std::vector<std::string>& flags);
  // Server({"--load", "ckpt"}): a braced list of strings is the words.
  explicit Server(std::initializer_list<std::string> flags)
      : Server(std::vector<std::string>(flags)) {}
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Once, on every rank (collective over the MPI world, which it initialises
  // unless the program has): the layout, the checkpoint and its tokenizer,
  // the memory check, the weights and the key/value cache pool; rank 0 binds
  // its socket and says "serve: listening on http://HOST:PORT (...)" on stderr.
  void start();
  // Rank 0 after start(): the port it listens on (the free one when port 0
  // was asked); other ranks: 0. Throws std::logic_error before start().
  int port() const;
  // `megatron serve`: start() (unless called), then serves until stop() (or
  // a signal, above); the requests still queued or running are answered 503.
  // Then everything is let go, and MPI finalised if start() initialised it (no
  // call may follow). Returns what the command exits with (0).
  int run();
  // Any thread, any time, more than once: run() returns (at once if called
  // later). On rank 0; the other ranks' run() ends with rank 0's.
  void stop();

  // start() or run() twice, port() before start() throw std::logic_error. Any
  // other error on any rank ends the whole job (one line, MPI_Abort), as the
  // binary does: a value out of range, a missing checkpoint, a port taken.

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace megatron
