// `megatron config` in a terminal, driven as a person would: tmux runs it in a
// pane of its own server, each prompt is awaited on the screen
// (capture-pane) before its answer is typed (send-keys) and Enter pressed;
// a mistyped answer is asked again. The file it writes is then read by
// `megatron plan --config` and trained 2 iterations by `megatron train
// --config` on the 2 ranks it answered. Without tmux the test fails, naming
// scripts/install_deps.sh (which installs it).
#include <chrono>
#include <thread>

#include "cli_test_util.h"

namespace mt::test {
namespace config_tmux_test {

namespace fs = std::filesystem;

// One tmux server of this test's own (its socket `socket`, in the test's
// temporary folder), one session "s"; the server is ended with the test.
class Tmux {
 public:
  Tmux(const std::string& socket, const std::string& command) : socket_(socket) {
    started_ = run(tmux() + " new-session -d -s s -x 160 -y 50 " + quoted(command)).exit_code == 0;
  }
  ~Tmux() { run(tmux() + " kill-server"); }
  bool started() const { return started_; }

  // What the pane shows, its scroll-back included, trailing blank lines dropped.
  std::string screen() const {
    std::string s = run(tmux() + " capture-pane -p -J -S -500 -t s").output;
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }
  // Waits until the last line shown contains `text` (a prompt waiting for its
  // answer), at most `seconds`.
  bool wait_for_prompt(std::string text, double seconds = 60) const {
    while (!text.empty() && text.back() == ' ') text.pop_back();  // the screen has none
    return wait([&](const std::string& s) {
      return s.substr(s.rfind('\n') == std::string::npos ? 0 : s.rfind('\n') + 1).find(text) !=
             std::string::npos;
    }, seconds);
  }
  // Waits until the screen contains `text` `times` times.
  bool wait_for_text(const std::string& text, int times = 1, double seconds = 60) const {
    return wait([&](const std::string& s) {
      int n = 0;
      for (size_t at = s.find(text); at != std::string::npos; at = s.find(text, at + 1)) ++n;
      return n >= times;
    }, seconds);
  }
  // Types `keys` (literally) and presses Enter.
  void type(const std::string& keys) const {
    if (!keys.empty()) run(tmux() + " send-keys -t s -l " + quoted(keys));
    press("Enter");
  }
  // Presses one key by tmux's name of it (Enter, C-d).
  void press(const std::string& key) const { run(tmux() + " send-keys -t s " + key); }

 private:
  std::string tmux() const { return "tmux -S " + socket_; }
  static std::string quoted(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  }
  template <class Pred>
  bool wait(Pred done, double seconds) const {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (done(screen())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  std::string socket_;
  bool started_ = false;
};

// The shipped profiles only (a100-80gb, h100-80gb) in `dir`/devices; `megatron
// config --output FILE` in a terminal, then its exit status on the screen.
std::string config_in_terminal(const TempDir& dir, const std::string& file) {
  fs::create_directories(dir.file("devices"));
  for (const char* d : {"a100-80gb.json", "h100-80gb.json"})
    fs::copy_file(std::string(MT_SOURCE_DIR) + "/configs/devices/" + d, dir.file("devices/") + d);
  return "env MEGATRON_DEVICES_DIR=" + dir.file("devices") + " OMP_NUM_THREADS=1 " + MT_BINARY +
         " config --output " + file + "; echo config-exit=$?; sleep 600";
}

void require_tmux() {
  ASSERT_EQ(run("command -v tmux").exit_code, 0)
      << "tmux is missing (this test drives `megatron config` in a terminal): run "
         "scripts/install_deps.sh, or apt-get install tmux";
}

TEST(ConfigTmux, APersonTypingGetsAFilePlanAndTrainAccept) {
  ASSERT_NO_FATAL_FAILURE(require_tmux());
  TempDir dir;
  const std::string file = dir.file("typed.toml");
  Tmux t(dir.file("tmux.sock"), config_in_terminal(dir, file));
  ASSERT_TRUE(t.started()) << "tmux could not start a session";
  // (prompt on the screen, what the person types); "" is Enter alone.
  const std::pair<const char*, const char*> steps[] = {
      {"Device profile (or a FILE.json) [a100-80gb]: ", "2"},
      {"How many machines [1]: ", ""},
      {"Processes (ranks) per machine [8]: ", "2"},
      {"Threads per process (OMP_NUM_THREADS) [", ""},
      {"Memory per process, GB [", ""},
      {"Model [gpt2-small]: ", "custom"},
      {"Architecture [gpt2]: ", "llama"},
      {"Layers [12]: ", "2"},
      {"Hidden size [768]: ", "64"},
      {"Attention heads [12]: ", "four"},
  };
  for (const auto& [prompt, keys] : steps) {
    ASSERT_TRUE(t.wait_for_prompt(prompt)) << "no prompt '" << prompt << "':\n" << t.screen();
    t.type(keys);
  }
  // The mistyped answer is asked again, with the reason.
  ASSERT_TRUE(t.wait_for_text("invalid: 'four' is not a whole number >= 1")) << t.screen();
  ASSERT_TRUE(t.wait_for_text("Attention heads [12]:", 2)) << t.screen();
  t.type("4");
  const std::pair<const char*, const char*> rest[] = {
      {"Key/value heads (query groups; = heads: no grouped-query attention) [4]: ", "2"},
      {"MLP hidden size [192]: ", ""},
      {"Vocabulary size (the tokenizer's) [50257]: ", "500"},
      {"Sequence length [1024]: ", "32"},
      {"Global batch size (sequences per iteration) [16]: ", "4"},
      {"Layout (a number, or hand to give the sizes yourself) [1]: ", ""},
  };
  for (const auto& [prompt, keys] : rest) {
    ASSERT_TRUE(t.wait_for_prompt(prompt)) << "no prompt '" << prompt << "':\n" << t.screen();
    t.type(keys);
  }
  ASSERT_TRUE(t.wait_for_text("config-exit=0")) << t.screen();
  EXPECT_NE(t.screen().find("wrote " + file), std::string::npos) << t.screen();
  const std::string text = read_text(file);
  for (const char* line : {"num-layers = 2\n", "hidden-size = 64\n", "num-attention-heads = 4\n",
                           "num-query-groups = 2\n", "seq-length = 32\n", "global-batch-size = 4\n",
                           "device = \"h100-80gb\"\n", "devices-per-node = 2\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  RunResult r = run("env MEGATRON_DEVICES_DIR=" + dir.file("devices") + " " + megatron() +
                    " plan --config " + file + " --top 3");
  EXPECT_EQ(r.exit_code, 0) << text << "\n" << r.output;
  const std::string log = dir.file("train.json");
  r = run(mpirun(2) + " train --config " + file +
          " --mock-data --tokenizer-type NullTokenizer --train-iters 2 --lr 1e-3"
          " --eval-interval 0 --log-interval 1 --peak-tflops 1 --log-json " + log);
  ASSERT_EQ(r.exit_code, 0) << text << "\n" << r.output;
  EXPECT_EQ(read_log_json(log).train.size(), 2u) << r.output;
}

// Ctrl-D (end of input) at the second question: exit 1, no file, the
// question named.
TEST(ConfigTmux, CtrlDMidwayExitsNonZeroWritingNothing) {
  ASSERT_NO_FATAL_FAILURE(require_tmux());
  TempDir dir;
  const std::string file = dir.file("never.toml");
  Tmux t(dir.file("tmux.sock"), config_in_terminal(dir, file));
  ASSERT_TRUE(t.started()) << "tmux could not start a session";
  ASSERT_TRUE(t.wait_for_prompt("Device profile (or a FILE.json) [a100-80gb]:")) << t.screen();
  t.type("");
  ASSERT_TRUE(t.wait_for_prompt("How many machines [1]:")) << t.screen();
  t.press("C-d");
  ASSERT_TRUE(t.wait_for_text("config-exit=1")) << t.screen();
  EXPECT_NE(t.screen().find("the input ended at the question 'How many machines'"),
            std::string::npos) << t.screen();
  EXPECT_FALSE(fs::exists(file));
  EXPECT_FALSE(fs::exists(file + ".tmp"));
}

}  // namespace config_tmux_test
}  // namespace mt::test
