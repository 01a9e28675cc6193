// The communication watchdog: Megatron's --distributed-timeout-minutes for
// MPI, where no collective can be cancelled.
//
// A peer that stops without dying (SIGSTOP, a frozen node, a stalled file
// system) or a link that goes down leaves the other ranks blocked in MPI for
// ever: Open MPI notices dead processes, not silent ones. So every blocking
// MPI call of the program (Communicator's collectives and send/recv, the
// wait of a non-blocking handle, communicator creation, MPI_Finalize) runs
// inside a WaitScope, which records on which operation and group this rank
// waits and since when. A CommWatchdog thread looks at that record a few
// times per timeout; when one wait has lasted longer than the timeout it
// prints one line
//   [rank R] error: no progress for 30.0 s in all_reduce on group 'dp'
//   (world ranks 0,2): a peer is stopped, dead or unreachable; ...
// and ends the job (MPI_Abort; if that does not return within a few
// seconds, _exit).
//
// Why a healthy run does not trip it: the clock runs only while this rank is
// blocked inside one MPI operation and restarts with the next one, so it
// measures how long a peer took to reach the same operation — at most the
// peer's compute between two communications (within one step), or rank 0
// writing a checkpoint / building a dataset index while the others wait. The
// default (10 minutes) is far above that; a lower timeout must stay above
// it. longest_completed_wait() is the longest wait that did complete; the
// trainer warns once when it exceeds a third of the timeout.
//
// Process-wide: MPI is used by one thread (MPI_THREAD_FUNNELED), so there is
// one wait record per process, like the one flag a signal handler needs.
#pragma once
#include <memory>
#include <string>

namespace mt {

// Who a communicator is, for messages: its name and its members' world ranks.
struct GroupId {
  std::string name;     // "tp", "dp", "pp", ...
  std::string members;  // "world ranks 0,2" (long groups abbreviated)
};

// "world ranks 0,1,2,3" — at most 16 listed, then "... (N ranks)".
std::string describe_members(const int* world_ranks, int n);

// RAII: the calling thread (the MPI thread) is blocked in `op` on `group`
// (and, for point-to-point, with world rank `peer`, else -1) until the
// scope ends. `op` must be a string literal; `group` must outlive the scope.
class WaitScope {
 public:
  WaitScope(const char* op, const GroupId* group, int peer = -1);
  ~WaitScope();
  WaitScope(const WaitScope&) = delete;
  WaitScope& operator=(const WaitScope&) = delete;

 private:
  bool outer_;  // false when nested in another scope (the outer one stays armed)
};

// The longest wait that completed since the watchdog started, in seconds,
// and where ("all_reduce on group 'dp' (world ranks 0,2)").
struct CompletedWait {
  double seconds = 0;
  std::string where;
};
CompletedWait longest_completed_wait();

// The message the watchdog prints (without "[rank R] error: "); for tests.
std::string timeout_message(double waited_s, double timeout_s, const char* op,
                            const GroupId* group, int peer);

class CommWatchdog {
 public:
  // Starts the watchdog thread; timeout_seconds <= 0: no thread (waits are
  // still recorded). At most one at a time.
  explicit CommWatchdog(double timeout_seconds);
  ~CommWatchdog();  // stops and joins the thread
  CommWatchdog(const CommWatchdog&) = delete;
  CommWatchdog& operator=(const CommWatchdog&) = delete;

  double timeout_seconds() const { return timeout_s_; }

 private:
  struct Thread;
  double timeout_s_;
  std::unique_ptr<Thread> thread_;
};

}  // namespace mt
