// For fault tests: a command run in the background (its output to a file),
// and the processes of an mpirun job found by rank, so a test can stop, kill
// or resume one rank while the job runs.
#pragma once
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_test_util.h"

namespace mt::test {

// `command` through sh in the background; output() and exit_code() once it
// ends. The destructor kills whatever of it is still running.
class BackgroundRun {
 public:
  BackgroundRun(const std::string& command, const std::string& dir)
      : out_(dir + "/bg_output.txt"), rc_(dir + "/bg_rc.txt"), marker_(dir) {
    std::filesystem::remove(rc_);
    const std::string sh = "(" + command + ") > " + out_ + " 2>&1; echo $? > " + rc_ + ".tmp && mv " +
                           rc_ + ".tmp " + rc_;
    start_ = std::chrono::steady_clock::now();
    std::system(("sh -c '" + sh + "' > /dev/null 2>&1 &").c_str());
  }
  // SIGTERM first, so that scripts clean up (emulated nodes), then SIGKILL.
  ~BackgroundRun() {
    for (pid_t p : pids_matching(marker_)) {
      ::kill(p, SIGCONT);
      ::kill(p, SIGTERM);
    }
    for (int i = 0; i < 50 && !pids_matching(marker_).empty(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (pid_t p : pids_matching(marker_)) ::kill(p, SIGKILL);
  }

  // Waits until the run ends or `seconds` pass; true if it ended.
  bool wait(double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until) {
      if (std::filesystem::exists(rc_)) {
        end_ = std::chrono::steady_clock::now();
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  int exit_code() const {
    std::ifstream in(rc_);
    int rc = -1;
    in >> rc;
    return rc;
  }
  std::string output() const { return read_text(out_); }
  // Seconds from the start to the end found by wait().
  double seconds_to_end() const { return std::chrono::duration<double>(end_ - start_).count(); }

  // Processes whose command line contains `marker` (a test's temp dir) and
  // whose environment says Open MPI world rank `rank` (-1: any).
  static std::vector<pid_t> pids_matching(const std::string& marker, int rank = -1) {
    std::vector<pid_t> pids;
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
      const std::string name = e.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      const pid_t pid = pid_t(std::stol(name));
      if (pid == ::getpid()) continue;
      std::string cmd = read_text(e.path().string() + "/cmdline");
      if (cmd.find(marker) == std::string::npos) continue;
      if (rank >= 0) {
        std::string env = read_text(e.path().string() + "/environ");
        for (char& c : env) c = c == '\0' ? '\n' : c;
        if (env.find("\nOMPI_COMM_WORLD_RANK=" + std::to_string(rank) + "\n") == std::string::npos)
          continue;
      }
      pids.push_back(pid);
    }
    return pids;
  }

 private:
  std::string out_, rc_, marker_;
  std::chrono::steady_clock::time_point start_, end_;
};

// Waits until the --log-json file at `path` has a training entry for
// iteration `it` (or `seconds` pass); true if it did.
inline bool wait_for_iteration(const std::string& path, int64_t it, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  const std::string needle = "\"iteration\":" + std::to_string(it) + ",";
  for (;;) {  // looks at least once
    if (read_text(path).find(needle) != std::string::npos) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace mt::test
