#include "comm/comm_handle.h"

#include <cstring>
#include <string>

#include "comm/mpi_env.h"
#include "core/error.h"

namespace mt {

CommHandle::~CommHandle() {
  if (!pending()) return;
  try {
    wait();
  } catch (const Error& e) {
    abort_job(e.what());  // a destructor cannot throw; end the job instead
  }
}

CommHandle::CommHandle(CommHandle&& o) noexcept
    : req_(std::move(o.req_)),
      move_dst_(std::exchange(o.move_dst_, nullptr)),
      move_src_(std::exchange(o.move_src_, nullptr)),
      move_bytes_(std::exchange(o.move_bytes_, 0)),
      kind_(o.kind_),
      op_(o.op_),
      group_(std::move(o.group_)),
      peer_(o.peer_),
      timeline_(o.timeline_),
      bytes_(o.bytes_) {}

CommHandle& CommHandle::operator=(CommHandle&& o) noexcept {
  if (this != &o) {
    if (pending()) {
      try {
        wait();
      } catch (const Error& e) {
        abort_job(e.what());
      }
    }
    req_ = std::move(o.req_);
    move_dst_ = std::exchange(o.move_dst_, nullptr);
    move_src_ = std::exchange(o.move_src_, nullptr);
    move_bytes_ = std::exchange(o.move_bytes_, 0);
    kind_ = o.kind_;
    op_ = o.op_;
    group_ = std::move(o.group_);
    peer_ = o.peer_;
    timeline_ = o.timeline_;
    bytes_ = o.bytes_;
  }
  return *this;
}

void CommHandle::fail(int rc) {
  const std::string reason = req_->error_text(rc);
  req_.reset();
  fail_comm(kind_, op_, group_->name, reason);
}

void CommHandle::wait() {
  if (!pending()) return;
  int rc;
  {
    TimelineSpan span(timeline_, TimelineKind::kCommWait, op_,
                      {.peer = peer_, .bytes = bytes_, .group = group_->name.c_str()});
    WaitScope waiting(op_, group_.get(), peer_);
    rc = req_->wait();
  }
  if (rc != 0) fail(rc);
  req_.reset();
  complete();
}

bool CommHandle::test() {
  if (!pending()) return true;
  bool done = false;
  const int rc = req_->test(&done);
  if (rc != 0) fail(rc);
  if (done) {
    req_.reset();
    complete();
  }
  return done;
}

CommHandle& CommHandle::then_move(float* dst, const float* src, int64_t n) {
  return then_move_bytes(dst, src, n, sizeof(float));
}

CommHandle& CommHandle::then_move_bytes(void* dst, const void* src, int64_t n, size_t elem) {
  MT_CHECK(n >= 0 && (n == 0 || (dst != nullptr && src != nullptr)), "then_move of ", n,
           " elements with a null pointer; fix: pass the buffers of the operation");
  const size_t bytes = size_t(n) * elem;
  if (!pending()) {  // already complete (e.g. a group of one)
    if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
    return *this;
  }
  move_dst_ = static_cast<char*>(dst);
  move_src_ = static_cast<const char*>(src);
  move_bytes_ = bytes;
  return *this;
}

void CommHandle::complete() {
  if (move_bytes_ > 0 && move_dst_ != move_src_) std::memmove(move_dst_, move_src_, move_bytes_);
  move_dst_ = nullptr;
  move_src_ = nullptr;
  move_bytes_ = 0;
}

}  // namespace mt
