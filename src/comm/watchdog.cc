#include "comm/watchdog.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "comm/mpi_env.h"

namespace mt {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// What the MPI thread is blocked in. Written by that thread only; read by
// the watchdog thread as a seqlock on since_ns (0: not waiting).
struct WaitRecord {
  std::atomic<int64_t> since_ns{0};
  std::atomic<const char*> op{""};
  std::atomic<const GroupId*> group{nullptr};
  std::atomic<int> peer{-1};
  // The longest completed wait (MPI thread only).
  double longest_s = 0;
  std::string longest_where;
};
WaitRecord g_wait;

std::string where(const char* op, const GroupId* group, int peer) {
  std::string s = op;
  if (peer >= 0) s += (std::string(op).find("send") != std::string::npos ? " to" : " from") +
                      std::string(" world rank ") + std::to_string(peer);
  if (group != nullptr) {
    s += " on group '" + group->name + "'";
    if (!group->members.empty()) s += " (" + group->members + ")";
  }
  return s;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", s);
  return buf;
}

std::string minutes_text(double m) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", m);
  return buf;
}

}  // namespace

std::string describe_members(const int* world_ranks, int n) {
  std::string s = "world ranks ";
  const int shown = n <= 16 ? n : 8;
  for (int i = 0; i < shown; ++i) {
    if (i > 0) s += ',';
    s += std::to_string(world_ranks[i]);
  }
  if (shown < n) s += ",... (" + std::to_string(n) + " ranks)";
  return s;
}

std::string timeout_message(double waited_s, double timeout_s, const char* op,
                            const GroupId* group, int peer) {
  return "no progress for " + seconds_text(waited_s) + " in " + where(op, group, peer) +
         " (--distributed-timeout-minutes " + minutes_text(timeout_s / 60.0) + " = " +
         seconds_text(timeout_s) +
         "): a peer is stopped, dead or unreachable, or slower than the timeout; fix: look for "
         "the rank that stopped (the first error of the job, a frozen node, a stalled file "
         "system, a downed link) and resume from the last checkpoint; raise "
         "--distributed-timeout-minutes if that peer was only slow";
}

WaitScope::WaitScope(const char* op, const GroupId* group, int peer)
    : outer_(g_wait.since_ns.load(std::memory_order_relaxed) == 0) {
  if (!outer_) return;
  g_wait.op.store(op, std::memory_order_relaxed);
  g_wait.group.store(group, std::memory_order_relaxed);
  g_wait.peer.store(peer, std::memory_order_relaxed);
  g_wait.since_ns.store(now_ns(), std::memory_order_release);
}

WaitScope::~WaitScope() {
  if (!outer_) return;
  const int64_t since = g_wait.since_ns.load(std::memory_order_relaxed);
  const double waited = double(now_ns() - since) * 1e-9;
  g_wait.since_ns.store(0, std::memory_order_release);
  if (waited > g_wait.longest_s) {  // rare after the first steps
    g_wait.longest_s = waited;
    g_wait.longest_where = where(g_wait.op.load(std::memory_order_relaxed),
                                 g_wait.group.load(std::memory_order_relaxed),
                                 g_wait.peer.load(std::memory_order_relaxed));
  }
}

CompletedWait longest_completed_wait() { return {g_wait.longest_s, g_wait.longest_where}; }

struct CommWatchdog::Thread {
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::thread thread;
};

namespace {

// Ends the job from the watchdog thread. MPI_Abort from a thread other than
// the MPI one works with Open MPI but is not promised by the standard, so a
// second thread exits the process if it has not returned after 10 s.
[[noreturn]] void end_job(int rank, const std::string& message) {
  const std::string line = abort_line(rank, message) + "\n";
  ssize_t unused = ::write(STDERR_FILENO, line.data(), line.size());
  (void)unused;
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(10));
    ::_exit(1);
  }).detach();
  if (mpi_running()) MPI_Abort(MPI_COMM_WORLD, 1);
  ::_exit(1);
}

}  // namespace

CommWatchdog::CommWatchdog(double timeout_seconds) : timeout_s_(timeout_seconds) {
  g_wait.longest_s = 0;
  g_wait.longest_where.clear();
  if (timeout_s_ <= 0) return;
  const int rank = world_rank_or_zero();
  // Checked a few times per timeout: a wait is caught at most ~5% late.
  const auto period = std::chrono::duration<double>(
      std::min(5.0, std::max(0.02, timeout_s_ / 20)));
  thread_ = std::make_unique<Thread>();
  Thread* t = thread_.get();
  const double timeout = timeout_s_;
  t->thread = std::thread([t, rank, period, timeout] {
    // When this thread itself did not run for a while (the process was
    // stopped and continued, or the machine suspended), the time frozen is
    // not a peer's fault: waits count from the thaw.
    const int64_t period_ns = int64_t(period.count() * 1e9);
    int64_t last = now_ns(), thawed = 0;
    std::unique_lock<std::mutex> lock(t->mu);
    while (!t->cv.wait_for(lock, period, [t] { return t->stop; })) {
      const int64_t now = now_ns();
      if (now - last > 2 * period_ns + 1'000'000'000) thawed = now;
      last = now;
      const int64_t since = g_wait.since_ns.load(std::memory_order_acquire);
      if (since == 0) continue;
      const double waited = double(now - std::max(since, thawed)) * 1e-9;
      if (waited <= timeout) continue;
      const char* op = g_wait.op.load(std::memory_order_relaxed);
      const GroupId* group = g_wait.group.load(std::memory_order_relaxed);
      const int peer = g_wait.peer.load(std::memory_order_relaxed);
      // Still the same wait: the MPI thread has been blocked in it all along.
      if (g_wait.since_ns.load(std::memory_order_acquire) != since) continue;
      end_job(rank, timeout_message(waited, timeout, op, group, peer));
    }
  });
}

CommWatchdog::~CommWatchdog() {
  if (!thread_) return;
  {
    std::lock_guard<std::mutex> lock(thread_->mu);
    thread_->stop = true;
  }
  thread_->cv.notify_all();
  thread_->thread.join();
}

}  // namespace mt
