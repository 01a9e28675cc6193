// `megatron serve` under load, as its clients see it (HTTP, streaming
// completions): for 1, 4, 16 and 64 concurrent clients, each doing a few
// greedy completions one after another, the generated tokens/s, the time to
// the first token and the request latency (p50, p99); then 16 requests sent
// together against the same 16 one after another (the serving issue wants
// >= 4x). One JSON line per client count, one for the speed-up.
//
// The server: --url of one running, or --load CKPT (started here with
// --threads OpenMP threads and --serve-flags), or by default a throwaway
// checkpoint of bench_decode's Llama shape (4 layers, hidden 512, GQA 8/2,
// SwiGLU, RMSNorm, RoPE; character tokenizer) trained one iteration.
// Usage: bench_serve [--url http://127.0.0.1:5000 | --load CKPT] [--clients 1,4,16,64]
//                    [--requests 2] [--prompt 32] [--new-tokens 32] [--rounds 3] [--threads 1]
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <latch>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_cli.h"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct ServeBench {
  std::string url, load, megatron, serve_flags, work_dir;
  std::vector<int64_t> clients = {1, 4, 16, 64};
  int64_t requests = 2, prompt = 32, new_tokens = 32, threads = 1, rounds = 3;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int sh(const std::string& cmd) { return std::system(cmd.c_str()); }

// Sentences of a tiny grammar: the corpus of the throwaway checkpoint and
// the source of the prompts (each request its own).
std::string corpus(int sentences, unsigned seed) {
  const char* subj[] = {"the cat", "a dog", "my friend", "the old king", "her brother", "the queen"};
  const char* verb[] = {"sees", "likes", "follows", "calls", "finds", "helps"};
  const char* obj[] = {"the river", "a small bird", "the castle", "his horse", "the garden", "a red apple"};
  std::mt19937 gen(seed);
  std::string text;
  for (int s = 0; s < sentences; ++s) {
    std::string sentence = std::string(subj[gen() % 6]) + " " + verb[gen() % 6] + " " + obj[gen() % 6] + ". ";
    sentence[0] = char(std::toupper(sentence[0]));
    text += sentence;
    if (s % 4 == 3) text += "\n\n";
  }
  return text;
}

// The throwaway checkpoint: bench_decode's shape, trained one iteration.
std::string make_checkpoint(const ServeBench& b, const std::string& dir) {
  std::ofstream(dir + "/corpus.txt") << corpus(2000, 5);
  const std::string m = "OMP_NUM_THREADS=" + std::to_string(b.threads) + " " + b.megatron;
  MT_CHECK(sh(m + " preprocess --input " + dir + "/corpus.txt --output-prefix " + dir + "/corpus > " + dir +
              "/make.log 2>&1") == 0,
           "bench_serve: megatron preprocess failed; see ", dir, "/make.log");
  MT_CHECK(sh(m + " train --data-path " + dir + "/corpus_text_document --vocab-file " + dir +
              "/corpus_vocab.json --num-layers 4 --hidden-size 512 --num-attention-heads 8"
              " --group-query-attention --num-query-groups 2 --ffn-hidden-size 1408 --swiglu"
              " --normalization RMSNorm --position-embedding-type rope --disable-bias-linear"
              " --untie-embeddings-and-output-weights --seq-length 512 --micro-batch-size 1"
              " --global-batch-size 1 --lr 1e-4 --train-iters 1 --eval-interval 0 --split 100,0,0"
              " --peak-tflops 1 --save " + dir + "/ckpt >> " + dir + "/make.log 2>&1") == 0,
           "bench_serve: megatron train failed; see ", dir, "/make.log");
  return dir + "/ckpt";
}

// `megatron serve --port 0` in the background; its port once it listens.
struct ServerProcess {
  pid_t pid = -1;
  int port = 0;
  ServerProcess(const ServeBench& b, const std::string& ckpt, const std::string& log) {
    const std::string cmd = "exec env OMP_NUM_THREADS=" + std::to_string(b.threads) + " " + b.megatron +
                            " serve --load " + ckpt + " --host 127.0.0.1 --port 0 " + b.serve_flags + " > " + log +
                            " 2>&1";
    pid = ::fork();
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const std::regex re("listening on http://[^:]+:(\\d+)");
    for (int i = 0; i < 2400 && port == 0; ++i) {
      std::smatch m;
      const std::string text = read_text(log);
      if (std::regex_search(text, m, re)) port = std::stoi(m[1]);
      else if (::waitpid(pid, nullptr, WNOHANG) == pid) break;
      else std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    MT_CHECK(port > 0, "bench_serve: megatron serve did not start listening; see ", log);
  }
  ~ServerProcess() {
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
  }
};

struct Sample {
  bool ok = false;
  double ttft_s = 0, latency_s = 0;
  int64_t tokens = 0;
  std::string error;  // why not ok: "status 429", httplib's "Read", ...
};

// One streaming greedy completion: when its first text arrived, when it
// ended, and how many tokens it generated (the usage chunk).
Sample complete(const std::string& host, int port, const std::string& prompt, int64_t new_tokens) {
  httplib::Client cli(host, port);
  cli.set_read_timeout(600);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.set_header("Content-Type", "application/json");
  req.body = Json{{"prompt", prompt}, {"max_tokens", new_tokens}, {"temperature", 0}, {"stream", true},
                  {"stream_options", {{"include_usage", true}}}}.dump();
  Sample s;
  std::string pending;
  const auto t0 = Clock::now();
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    pending.append(data, n);
    for (size_t end; (end = pending.find("\n\n")) != std::string::npos; pending.erase(0, end + 2)) {
      const std::string event = pending.substr(0, end);
      if (event.rfind("data: ", 0) != 0 || event == "data: [DONE]") continue;
      const Json j = Json::parse(event.substr(6), nullptr, false);
      if (!j.is_object()) continue;
      if (j.contains("usage") && j.at("usage").is_object()) s.tokens = j.at("usage").value("completion_tokens", 0);
      if (s.ttft_s == 0 && j.contains("choices") && !j.at("choices").empty() &&
          !j.at("choices")[0].value("text", "").empty())
        s.ttft_s = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    return true;
  };
  const httplib::Result r = cli.send(req);
  s.latency_s = std::chrono::duration<double>(Clock::now() - t0).count();
  s.ok = r && r->status == 200 && s.tokens > 0;
  if (!r) s.error = httplib::to_string(r.error());
  else if (r->status != 200) s.error = "status " + std::to_string(r->status);
  else if (!s.ok) s.error = "no usage chunk";
  return s;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p / 100.0 * double(v.size() - 1) + 0.5))];
}

// `clients` threads released together, each doing `requests` completions in
// turn; every sample, and the wall time from the release to the last answer.
std::vector<Sample> load(const std::string& host, int port, int64_t clients, int64_t requests, const ServeBench& b,
                         double* wall_s) {
  std::vector<Sample> samples(size_t(clients * requests));
  const std::string text = corpus(4000, 17);
  std::latch start(std::ptrdiff_t(clients) + 1);
  std::vector<std::thread> threads;
  for (int64_t c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      start.arrive_and_wait();
      for (int64_t r = 0; r < requests; ++r) {
        const int64_t i = c * requests + r;
        const std::string prompt = text.substr(size_t(i * 37 % int64_t(text.size() - size_t(b.prompt))), size_t(b.prompt));
        samples[size_t(i)] = complete(host, port, prompt, b.new_tokens);
      }
    });
  start.arrive_and_wait();
  const auto t0 = Clock::now();
  for (auto& t : threads) t.join();
  *wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return samples;
}

Json summary(int64_t clients, int64_t requests, const std::vector<Sample>& samples, double wall_s) {
  std::vector<double> ttft, latency;
  int64_t tokens = 0, errors = 0;
  std::map<std::string, int64_t> why;
  for (const Sample& s : samples) {
    if (!s.ok) {
      ++errors;
      ++why[s.error];
      continue;
    }
    ttft.push_back(s.ttft_s * 1e3);
    latency.push_back(s.latency_s * 1e3);
    tokens += s.tokens;
  }
  auto r1 = [](double x) { return std::round(x * 10) / 10; };
  return {{"bench", "serve"}, {"clients", clients}, {"requests", clients * requests}, {"errors", errors},
          {"completion_tokens", tokens}, {"seconds", std::round(wall_s * 1000) / 1000}, {"tokens_per_s", r1(tokens / wall_s)},
          {"ttft_ms_p50", r1(percentile(ttft, 50))}, {"ttft_ms_p99", r1(percentile(ttft, 99))},
          {"latency_ms_p50", r1(percentile(latency, 50))}, {"latency_ms_p99", r1(percentile(latency, 99))},
          {"error_kinds", why}};
}

int run(ServeBench& b) {
  std::string host = "127.0.0.1";
  int port = 0;
  std::unique_ptr<ServerProcess> server;
  std::string tmp;
  if (!b.url.empty()) {
    const std::regex re("http://([^:/]+):(\\d+)/?");
    std::smatch m;
    MT_CHECK(std::regex_match(b.url, m, re), "bench_serve: --url ", b.url, " is not http://HOST:PORT");
    host = m[1];
    port = std::stoi(m[2]);
  } else {
    if (b.megatron.empty()) b.megatron = (fs::canonical("/proc/self/exe").parent_path().parent_path() / "megatron").string();
    MT_CHECK(fs::exists(b.megatron), "bench_serve: no megatron binary at ", b.megatron, "; fix: --megatron PATH");
    char dir_template[] = "/tmp/bench_serve_XXXXXX";
    tmp = b.work_dir.empty() ? std::string(::mkdtemp(dir_template)) : b.work_dir;
    fs::create_directories(tmp);
    const std::string ckpt = b.load.empty() ? make_checkpoint(b, tmp) : b.load;
    if (b.serve_flags.empty()) {
      const int64_t most = *std::max_element(b.clients.begin(), b.clients.end());
      b.serve_flags = "--inference-max-requests " + std::to_string(std::max<int64_t>(16, most)) +
                      " --inference-max-seq-length " + std::to_string(b.prompt + b.new_tokens) +
                      " --max-queued-requests " + std::to_string(std::max<int64_t>(64, most) * 2);
    }
    server = std::make_unique<ServerProcess>(b, ckpt, tmp + "/serve.log");
    port = server->port;
    std::fprintf(stderr, "bench_serve: %s serve on %s, flags: %s\n", b.megatron.c_str(), ckpt.c_str(),
                 b.serve_flags.c_str());
  }
  double wall = 0;
  load(host, port, 1, 1, b, &wall);  // warm-up
  for (int64_t c : b.clients) {
    const std::vector<Sample> s = load(host, port, c, b.requests, b, &wall);
    std::printf("%s\n", summary(c, b.requests, s, wall).dump().c_str());
    std::fflush(stdout);
  }
  // The same 16 requests one after another, then all at once: alternating
  // rounds, the fastest of each side (the shared cores' noise only slows).
  double one_by_one = 1e30, together = 1e30;
  int64_t errors = 0;
  std::map<std::string, int64_t> why;
  for (int64_t round = 0; round < b.rounds; ++round) {
    double seq_s = 0, con_s = 0;
    const std::vector<Sample> seq = load(host, port, 1, 16, b, &seq_s);
    const std::vector<Sample> con = load(host, port, 16, 1, b, &con_s);
    for (const auto* v : {&seq, &con})
      for (const Sample& s : *v)
        if (!s.ok) ++errors, ++why[s.error];
    one_by_one = std::min(one_by_one, seq_s);
    together = std::min(together, con_s);
  }
  auto r3 = [](double x) { return std::round(x * 1000) / 1000; };
  std::printf("%s\n", Json{{"bench", "serve"}, {"requests", 16}, {"rounds", b.rounds}, {"one_after_another_s", r3(one_by_one)},
                           {"together_s", r3(together)}, {"speedup_16_together", std::round(one_by_one / together * 100) / 100},
                           {"target", 4.0}, {"errors", errors}, {"error_kinds", why}}.dump().c_str());
  server.reset();
  if (!tmp.empty() && b.work_dir.empty()) fs::remove_all(tmp);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ServeBench b;
  CLI::App app("megatron serve under 1, 4, 16, 64 concurrent streaming clients: tokens/s, time to first token, "
               "latency; 16 together vs one after another",
               "bench_serve");
  app.add_option("--url", b.url, "a running server, http://HOST:PORT (else one is started here)");
  app.add_option("--load", b.load, "checkpoint to serve (default: a throwaway one of bench_decode's shape)");
  app.add_option("--megatron", b.megatron, "the megatron binary (default: ../megatron beside this one)");
  app.add_option("--serve-flags", b.serve_flags,
                 "flags of the started server (default: room for every client at once)");
  app.add_option("--work-dir", b.work_dir, "where the throwaway checkpoint and the server's log go (kept)");
  app.add_option("--clients", b.clients, "concurrent client counts")->delimiter(',')->check(at_least(1));
  app.add_option("--requests", b.requests, "completions per client, one after another")->check(at_least(1));
  app.add_option("--prompt", b.prompt, "prompt characters (tokens, with the character tokenizer)")->check(at_least(1));
  app.add_option("--new-tokens", b.new_tokens, "max_tokens of each completion")->check(at_least(1));
  app.add_option("--rounds", b.rounds, "rounds of 16 one after another vs together (the fastest of each)")
      ->check(at_least(1));
  app.add_option("--threads", b.threads, "OpenMP threads of the started server")->check(at_least(1));
  if (const int rc = parse_bench_args(app, argc, argv); rc >= 0) return rc;
  return run_bench([&] { return run(b); });
}
