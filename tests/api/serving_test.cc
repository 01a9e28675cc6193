// megatron::Server (include/megatron/serving.h) from its options struct, at 1
// rank and under `mpirun -n 2` (TP2): on port 0 over a tiny character model
// trained here, a greedy /v1/completions answers what
// megatron::DecodingSession::generate gives for the same prompt; stop() from
// the client's thread ends run(). Its words are `megatron serve`'s: --help is
// a FlagHelp with serve's usage, an unknown flag a FlagError naming it.
#include <gtest/gtest.h>
#include <httplib.h>
#include <mpi.h>
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "megatron/decoding.h"
#include "megatron/serving.h"
#include "megatron/trainer.h"
#include "mpi_world.h"
#include "temp_dir.h"

namespace serving_test {

using mt::test::shared_dir;
using mt::test::world_rank;
using mt::test::world_size;

// A character GPT (2 layers, hidden 32, context 64) trained 4 iterations on
// mock documents over a 28-character vocabulary + end of document: its
// greedy text is some string of those characters. Returns the checkpoint.
std::string tiny_checkpoint(const std::string& dir) {
  if (world_rank() == 0) {
    std::ofstream vocab(dir + "/vocab.json");
    vocab << "[\" \", \".\"";
    for (char c = 'a'; c <= 'z'; ++c) vocab << ", \"" << c << "\"";
    vocab << ", \"<|endoftext|>\"]";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  megatron::Trainer t({"--mock-data", "--vocab-file", dir + "/vocab.json", "--num-layers", "2",
                       "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "64",
                       "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "4",
                       "--lr", "1e-2", "--eval-interval", "0", "--peak-tflops", "1",
                       "--log-interval", "4", "--seed", "7", "--save", dir + "/ckpt"});
  EXPECT_EQ(t.run(), 0);
  return dir + "/ckpt";
}

TEST(Serving, GreedyCompletionOnPortZeroIsTheDecodingSessionsAndStopEndsRun) {
  mt::test::TempDir tmp;
  const std::string ckpt = tiny_checkpoint(shared_dir(tmp));
  const std::string prompt = "the king sees a dog";
  constexpr int kMaxTokens = 12;

  // What the library's decoding session gives, greedy, at the same layout.
  std::string want;
  {
    megatron::DecodingSession session({.load = ckpt, .tensor_parallel = world_size()});
    const std::vector<megatron::Completion> c = session.generate({prompt}, {.max_tokens = kMaxTokens});
    if (world_rank() == 0) {
      ASSERT_EQ(c.size(), 1u);
      std::vector<int32_t> shown = c[0].tokens;
      if (c[0].finish == "stop") shown.pop_back();  // the end of document is not shown
      want = session.detokenize(shown);
    }
  }

  megatron::ServingOptions o;
  o.load = ckpt;
  o.port = 0;
  o.tensor_parallel = world_size();
  o.max_requests = 2;
  o.max_seq_length = 64;
  o.block_size = 16;
  o.max_step_tokens = 64;
  o.model_name = "tiny";
  megatron::Server server(o);
  EXPECT_THROW(server.port(), std::logic_error);  // before start()
  server.start();
  const int port = server.port();
  int status = 0;
  nlohmann::json answer;
  std::thread client;
  if (world_rank() == 0) {
    ASSERT_GT(port, 0);
    client = std::thread([&] {
      httplib::Client cli("127.0.0.1", port);
      cli.set_read_timeout(std::chrono::seconds(60));
      const nlohmann::json body = {{"model", "tiny"}, {"prompt", prompt},
                                   {"max_tokens", kMaxTokens}, {"temperature", 0}};
      if (httplib::Result r = cli.Post("/v1/completions", body.dump(), "application/json")) {
        status = r->status;
        answer = nlohmann::json::parse(r->body, nullptr, false);
      }
      server.stop();
    });
  } else {
    EXPECT_EQ(port, 0);  // only rank 0 listens
  }
  EXPECT_EQ(server.run(), 0);  // this thread: MPI's
  if (client.joinable()) client.join();
  // SIGINT / SIGTERM (blocked by start(), ServingOptions::stop_on_signals) back to the test's.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
  EXPECT_THROW(server.run(), std::logic_error);
  if (world_rank() != 0) return;
  ASSERT_EQ(status, 200) << answer.dump();
  ASSERT_TRUE(answer.is_object()) << answer.dump();
  EXPECT_EQ(answer.at("model"), "tiny");
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(answer.at("choices").at(0).at("text").get<std::string>(), want) << answer.dump();
  std::printf("[ %s -> %s ]\n", prompt.c_str(), want.c_str());
}

TEST(Serving, OptionsOutOfRangeAreRefusedNamingTheFlag) {
  megatron::ServingOptions o;
  o.load = "ckpt";
  o.port = 70000;
  try {
    megatron::Server s(o);
    FAIL() << "port 70000 did not throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "--port 70000 must be in 0..65535 (0: any free one)");
  }
  o.port = 0;
  o.max_requests = 8;
  o.max_step_tokens = 4;
  EXPECT_THROW(megatron::Server{o}, std::invalid_argument);
}

TEST(ServingFlags, HelpIsAFlagHelpWithTheServeUsage) {
  try {
    megatron::Server s({"--help"});
    FAIL() << "--help did not throw";
  } catch (const megatron::FlagHelp& h) {
    const std::string usage = h.what();
    EXPECT_EQ(usage.rfind("Megatron's text generation API and an OpenAI-compatible one over a "
                          "checkpoint\nUsage: serve [OPTIONS]\n", 0), 0u) << usage;
    EXPECT_NE(usage.find("--inference-dynamic-batching-buffer-size-gb"), std::string::npos);
  }
}

TEST(ServingFlags, AnUnknownFlagIsAFlagErrorNamingIt) {
  try {
    megatron::Server s({"--load", "ckpt", "--prot", "0"});
    FAIL() << "--prot did not throw";
  } catch (const megatron::FlagHelp& h) {
    FAIL() << "a FlagHelp: " << h.what();
  } catch (const megatron::FlagError& e) {
    EXPECT_EQ(std::string(e.what()),
              "unknown flag --prot; the nearest flag of `megatron serve` is --port; "
              "see `megatron serve --help`");
  }
}

}  // namespace serving_test
