// CommHandle: the RAII handle of one non-blocking communication
// (Communicator's start_* / isend / irecv) over a backend's CommRequest.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "comm/comm_backend.h"
#include "comm/watchdog.h"
#include "core/timeline.h"

namespace mt {

// Handle of a non-blocking operation (start_* / isend / irecv). wait()
// completes it (and throws on error); the destructor waits too, so the
// buffers must outlive the handle. Move-only; a default handle is complete.
class CommHandle {
 public:
  CommHandle() = default;
  // `kind`: the backend's kind() (for messages); `peer`: the world rank of a
  // point-to-point peer, else -1.
  CommHandle(std::unique_ptr<CommRequest> req, const char* kind, const char* op,
             std::shared_ptr<const GroupId> group, int peer = -1)
      : req_(std::move(req)), kind_(kind), op_(op), group_(std::move(group)), peer_(peer) {}
  ~CommHandle();
  CommHandle(CommHandle&& o) noexcept;
  CommHandle& operator=(CommHandle&& o) noexcept;
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;

  void wait();
  // True once the operation has finished (then wait() returns at once).
  bool test();
  bool pending() const { return req_ != nullptr; }
  // On completion (in wait() or a successful test()), also memmove n floats
  // from src to dst: for results the transport leaves elsewhere than the
  // caller wants them.
  CommHandle& then_move(float* dst, const float* src, int64_t n);
  // The same for n elements of `elem` bytes.
  CommHandle& then_move_bytes(void* dst, const void* src, int64_t n, size_t elem);
  // wait() adds a span to `timeline` while it records ("wait <op>", with the
  // group and `bytes`): the time the overlap did not hide.
  void record_wait(Timeline* timeline, int64_t bytes) {
    timeline_ = timeline;
    bytes_ = bytes;
  }

 private:
  void complete();  // runs the pending move, if any
  [[noreturn]] void fail(int rc);  // drops the request, throws

  std::unique_ptr<CommRequest> req_;  // null once complete
  char* move_dst_ = nullptr;
  const char* move_src_ = nullptr;
  size_t move_bytes_ = 0;
  const char* kind_ = "";
  const char* op_ = "";
  std::shared_ptr<const GroupId> group_;  // the Communicator's, for messages
  int peer_ = -1;
  Timeline* timeline_ = nullptr;  // not owned (record_wait)
  int64_t bytes_ = -1;
};

}  // namespace mt
