#include "comm/communicator.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>

#include "comm/mpi_backend.h"
#include "core/error.h"

namespace mt {
namespace {

// A blocking backend call: adds the wall time of its scope to a counter,
// arms the watchdog (comm/watchdog.h) with the operation and the group, and
// while the group's timeline records, spans it there with the group and the
// bytes moved (-1: none).
class BusyTimer {
 public:
  BusyTimer(double& acc, const char* op, const GroupId* group, int peer, Timeline* timeline,
            int64_t bytes)
      : wait_(op, group, peer),
        span_(timeline, TimelineKind::kCollective, op,
              SpanArgs{.peer = peer, .bytes = bytes, .group = group->name.c_str()}),
        acc_(acc),
        t0_(std::chrono::steady_clock::now()) {}
  ~BusyTimer() {
    acc_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

 private:
  WaitScope wait_;
  TimelineSpan span_;
  double& acc_;
  std::chrono::steady_clock::time_point t0_;
};

bool overlaps(const void* a, size_t abytes, const void* b, size_t bbytes) {
  const char* pa = static_cast<const char*>(a);
  const char* pb = static_cast<const char*>(b);
  return pa < pb + bbytes && pb < pa + abytes;
}

}  // namespace

// ---------------------------------------------------------------- Communicator

Communicator::Communicator(std::unique_ptr<CommBackend> backend, std::string name)
    : backend_(std::move(backend)), name_(std::move(name)) {
  if (!backend_) return;
  rank_ = backend_->rank();
  size_ = backend_->size();
  max_tag_ = backend_->max_tag();
  world_ranks_ = backend_->world_ranks();
  MT_CHECK(size_ > 0 && rank_ >= 0 && rank_ < size_ && int(world_ranks_.size()) == size_,
           "group '", name_, "': the ", backend_->kind(), " backend reports rank ", rank_,
           " of ", size_, " with ", world_ranks_.size(), " world ranks");
  id_ = std::make_shared<const GroupId>(
      GroupId{name_, describe_members(world_ranks_.data(), size_)});
}

Communicator Communicator::world() { return Communicator(mpi_world_backend(), "world"); }

Communicator Communicator::split(int color, int key, std::string name) const {
  check_member("split");
  std::unique_ptr<CommBackend> sub;
  int rc;
  {
    WaitScope waiting("Comm_split", id_.get());
    rc = backend_->split(color, key, &sub);
  }
  if (rc != 0) fail_comm(backend_->kind(), "Comm_split", name, backend_->error_text(rc));
  return Communicator(std::move(sub), std::move(name));
}

std::vector<std::string> Communicator::processor_names() const {
  const char* op = "Allgather(processor names)";
  check_member(op);
  const size_t width = kMaxProcessorName;
  std::vector<char> names(size_t(size_) * width, 0);
  const std::string mine = backend_->processor_name();
  char* own = names.data() + size_t(rank_) * width;
  std::memcpy(own, mine.data(), std::min(mine.size(), width - 1));
  if (size_ > 1) {
    WaitScope waiting(op, id_.get());
    check(backend_->all_gather(names.data(), own, int64_t(width), ElemType::kU8), op);
  }
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r) out.emplace_back(names.data() + size_t(r) * width);
  return out;
}

Communicator::~Communicator() = default;

Communicator::Communicator(Communicator&& o) noexcept
    : backend_(std::move(o.backend_)),
      id_(std::move(o.id_)),
      world_ranks_(std::move(o.world_ranks_)),
      name_(std::move(o.name_)),
      rank_(std::exchange(o.rank_, -1)),
      size_(std::exchange(o.size_, 0)),
      max_tag_(o.max_tag_) {
  timeline_ = std::exchange(o.timeline_, nullptr);
}

Communicator& Communicator::operator=(Communicator&& o) noexcept {
  if (this != &o) {
    backend_ = std::move(o.backend_);
    id_ = std::move(o.id_);
    world_ranks_ = std::move(o.world_ranks_);
    name_ = std::move(o.name_);
    rank_ = std::exchange(o.rank_, -1);
    size_ = std::exchange(o.size_, 0);
    max_tag_ = o.max_tag_;
    timeline_ = std::exchange(o.timeline_, nullptr);
  }
  return *this;
}

void Communicator::check(int rc, const char* op) const {
  if (rc != 0) fail_comm(backend_->kind(), op, name_, backend_->error_text(rc));
}

CommHandle Communicator::handle(int rc, CommBackend::Request req, const char* op, int peer,
                                int64_t bytes) const {
  check(rc, op);
  MT_CHECK(req != nullptr, op, " on group '", name_, "': the ", backend_->kind(),
           " backend started no request");
  CommHandle h(std::move(req), backend_->kind(), op, id_, peer);
  if (timeline_ != nullptr) h.record_wait(timeline_, bytes);
  return h;
}

void Communicator::check_member(const char* op) const {
  MT_CHECK(size_ > 0, op, " on group '", name_,
           "': this rank is not a member of the group (null communicator); fix: guard the call "
           "with is_member()");
}

int64_t Communicator::count(const char* op, int64_t n) const {
  MT_CHECK(n >= 0 && n <= INT_MAX, op, " on group '", name_, "': element count ", n,
           " is not in [0, ", INT_MAX, "]; fix: split the buffer into smaller calls");
  return n;
}

void Communicator::check_peer(const char* op, int peer, int tag) const {
  check_member(op);
  MT_CHECK(peer >= 0 && peer < size_, op, " on group '", name_, "': peer ", peer,
           " is not a rank of this group of size ", size_);
  MT_CHECK(tag >= 0 && tag <= max_tag_, op, " on group '", name_, "': tag ", tag, " not in [0, ",
           max_tag_, "]");
}

void Communicator::check_split(const char* op, const ChunkSplit& split) const {
  check_member(op);
  MT_CHECK(int(split.counts.size()) == size_ && split.displs.size() == split.counts.size(), op,
           " on group '", name_, "': the split has ", split.counts.size(), " counts and ",
           split.displs.size(), " displacements for a group of ", size_,
           "; fix: build it with chunk_split() with one chunk per rank");
  for (size_t i = 0; i < split.counts.size(); ++i)
    MT_CHECK(split.counts[i] >= 0 &&
                 split.displs[i] == (i == 0 ? 0 : split.displs[i - 1] + split.counts[i - 1]),
             op, " on group '", name_, "': chunk ", i, " (count ", split.counts[i], ", displ ",
             split.displs[i], ") does not follow the previous one; fix: use chunk_split()");
}

// ---------------------------------------------------------------- reductions

void Communicator::all_reduce(void* x, int64_t n, ElemType type, ReduceOp op,
                              const char* what) const {
  BusyTimer busy(busy_seconds_, what, id_.get(), -1, timeline_, n * int64_t(elem_bytes(type)));
  all_reduce_chunked(x, n, type, op, what);
}

void Communicator::all_reduce_chunked(void* x, int64_t n, ElemType type, ReduceOp op,
                                      const char* what) const {
  check_member(what);
  MT_CHECK(n >= 0, what, " on group '", name_, "': negative element count ", n);
  if (size_ == 1 || n == 0) return;
  // In chunks of at most kReduceChunkBytes (which also keeps the backend's
  // int counts in range): one 38.6M-float all-reduce (GPT-2's word embedding)
  // takes ~400 ms over Open MPI's shared memory on these machines, the same
  // floats in 1M-float chunks ~26 ms (bench/README.md, "Collectives").
  const int64_t elem = int64_t(elem_bytes(type));
  const int64_t chunk = kReduceChunkBytes / elem;
  char* p = static_cast<char*>(x);
  for (int64_t done = 0; done < n; done += chunk)
    check(backend_->all_reduce(p + done * elem, std::min(n - done, chunk), type, op), what);
}

void Communicator::all_reduce_sum(float* x, int64_t n) const {
  all_reduce(x, n, ElemType::kF32, ReduceOp::kSum, "all_reduce_sum(float)");
}
void Communicator::all_reduce_sum(double* x, int64_t n) const {
  all_reduce(x, n, ElemType::kF64, ReduceOp::kSum, "all_reduce_sum(double)");
}
void Communicator::all_reduce_sum(int64_t* x, int64_t n) const {
  all_reduce(x, n, ElemType::kI64, ReduceOp::kSum, "all_reduce_sum(int64)");
}
void Communicator::all_reduce_max(float* x, int64_t n) const {
  all_reduce(x, n, ElemType::kF32, ReduceOp::kMax, "all_reduce_max(float)");
}
void Communicator::all_reduce_max(double* x, int64_t n) const {
  all_reduce(x, n, ElemType::kF64, ReduceOp::kMax, "all_reduce_max(double)");
}
void Communicator::all_reduce_max(int* x, int64_t n) const {
  all_reduce(x, n, ElemType::kI32, ReduceOp::kMax, "all_reduce_max(int)");
}
void Communicator::all_reduce_sum_bf16(uint16_t* x, int64_t n) const {
  all_reduce(x, n, ElemType::kU16, ReduceOp::kBf16Sum, "all_reduce_sum_bf16");
}

void Communicator::reduce_scatter_sum(float* out, const float* in, int64_t n) const {
  const char* op = "reduce_scatter_sum";
  BusyTimer busy(busy_seconds_, op, id_.get(), -1, timeline_, n * size_ * 4);
  check_member(op);
  const int64_t c = count(op, n * size_);
  MT_CHECK(!overlaps(out, size_t(n) * 4, in, size_t(c) * 4) || (size_ == 1 && out == in), op,
           " on group '", name_, "': input and output overlap; fix: reduce into a separate buffer");
  if (size_ == 1 || c == 0) {
    if (out != in && n > 0) std::memcpy(out, in, size_t(n) * sizeof(float));
    return;
  }
  check(backend_->reduce_scatter(out, in, n, ElemType::kF32, ReduceOp::kSum), op);
}

void Communicator::reduce_scatter_sum_in_place(float* x, const ChunkSplit& split) const {
  reduce_scatter_in_place(x, split, ElemType::kF32, ReduceOp::kSum,
                          "reduce_scatter_sum_in_place");
}

void Communicator::reduce_scatter_sum_bf16_in_place(uint16_t* x, const ChunkSplit& split) const {
  reduce_scatter_in_place(x, split, ElemType::kU16, ReduceOp::kBf16Sum,
                          "reduce_scatter_sum_bf16_in_place");
}

void Communicator::reduce_scatter_in_place(void* x, const ChunkSplit& split, ElemType type,
                                           ReduceOp op, const char* what) const {
  BusyTimer busy(busy_seconds_, what, id_.get(), -1, timeline_,
                 split.total() * int64_t(elem_bytes(type)));
  check_split(what, split);
  if (size_ == 1 || split.total() == 0) return;
  if (split.total() * int64_t(elem_bytes(type)) > kReduceChunkBytes) {
    // Open MPI's reduce-scatter of one large buffer is slower still than its
    // all-reduce (~760 ms for 38.6M floats here); a chunked all-reduce leaves
    // the sum everywhere, this rank's chunk included.
    all_reduce_chunked(x, split.total(), type, op, what);
    return;
  }
  check(backend_->reduce_scatter_in_place(x, split, type, op), what);
}

// ---------------------------------------------------------------- gathers, all-to-all

void Communicator::all_gather(float* out, const float* in, int64_t n) const {
  all_gather(out, in, n, ElemType::kF32);
}

void Communicator::all_gather(uint16_t* out, const uint16_t* in, int64_t n) const {
  all_gather(out, in, n, ElemType::kU16);
}

void Communicator::all_gather(void* out_v, const void* in_v, int64_t n, ElemType type) const {
  const char* op = "all_gather";
  BusyTimer busy(busy_seconds_, op, id_.get(), -1, timeline_,
                 n * size_ * int64_t(elem_bytes(type)));
  check_member(op);
  char* out = static_cast<char*>(out_v);
  const char* in = static_cast<const char*>(in_v);
  const size_t elem = elem_bytes(type);
  const int64_t c = count(op, n * size_);
  const bool in_place = in == out + int64_t(rank_) * n * int64_t(elem);
  if (size_ == 1 || c == 0) {
    if (!in_place && n > 0) std::memmove(out, in, size_t(n) * elem);
    return;
  }
  MT_CHECK(in_place || !overlaps(out, size_t(c) * elem, in, size_t(n) * elem), op,
           " on group '", name_,
           "': input overlaps the output but is not this rank's chunk; fix: pass "
           "in == out + rank * n or separate buffers");
  check(backend_->all_gather(out, in, n, type), op);
}

void Communicator::all_gather_in_place(float* x, const ChunkSplit& split) const {
  all_gather_in_place(x, split, ElemType::kF32);
}

void Communicator::all_gather_in_place(uint16_t* x, const ChunkSplit& split) const {
  all_gather_in_place(x, split, ElemType::kU16);
}

void Communicator::all_gather_in_place(void* x, const ChunkSplit& split, ElemType type) const {
  const char* op = "all_gather_in_place";
  BusyTimer busy(busy_seconds_, op, id_.get(), -1, timeline_,
                 split.total() * int64_t(elem_bytes(type)));
  check_split(op, split);
  if (size_ == 1 || split.total() == 0) return;
  check(backend_->all_gather_in_place(x, split, type), op);
}

void Communicator::all_to_all_v(float* out, const ChunkSplit& recv_split, const float* in,
                                const ChunkSplit& send_split) const {
  all_to_all_v(out, recv_split, in, send_split, ElemType::kF32);
}

void Communicator::all_to_all_v(uint16_t* out, const ChunkSplit& recv_split, const uint16_t* in,
                                const ChunkSplit& send_split) const {
  all_to_all_v(out, recv_split, in, send_split, ElemType::kU16);
}

void Communicator::all_to_all_v(void* out, const ChunkSplit& recv_split, const void* in,
                                const ChunkSplit& send_split, ElemType type) const {
  const char* op = "all_to_all_v";
  BusyTimer busy(busy_seconds_, op, id_.get(), -1, timeline_,
                 send_split.total() * int64_t(elem_bytes(type)));
  check_split(op, send_split);
  check_split(op, recv_split);
  if (size_ == 1) {
    MT_CHECK(send_split.total() == recv_split.total(), op, " on group '", name_, "': sends ",
             send_split.total(), " elements to itself but receives ", recv_split.total());
    const size_t bytes = size_t(send_split.total()) * elem_bytes(type);
    if (bytes > 0) std::memmove(out, in, bytes);
    return;
  }
  check(backend_->all_to_all_v(out, recv_split, in, send_split, type), op);
}

std::vector<int64_t> Communicator::all_to_all_counts(const std::vector<int64_t>& send) const {
  const char* op = "all_to_all_counts";
  BusyTimer busy(busy_seconds_, op, id_.get(), -1, timeline_, int64_t(send.size()) * 8);
  check_member(op);
  MT_CHECK(int(send.size()) == size_, op, " on group '", name_, "': ", send.size(),
           " counts for a group of ", size_);
  if (size_ == 1) return send;
  const ChunkSplit one_each = chunk_split(std::vector<int64_t>(send.size(), 1));
  std::vector<int64_t> recv(send.size(), 0);
  check(backend_->all_to_all_v(recv.data(), one_each, send.data(), one_each, ElemType::kI64), op);
  return recv;
}

void Communicator::broadcast(void* data, size_t bytes, int root) const {
  const char* op = "broadcast";
  BusyTimer busy(busy_seconds_, op, id_.get(), -1, timeline_, int64_t(bytes));
  check_member(op);
  MT_CHECK(root >= 0 && root < size_, op, " on group '", name_, "': root ", root,
           " is not a rank of this group of size ", size_);
  if (size_ == 1) return;
  constexpr size_t kChunk = size_t(1) << 30;
  char* p = static_cast<char*>(data);
  for (size_t done = 0; done < bytes; done += kChunk)
    check(backend_->broadcast(p + done, int64_t(std::min(bytes - done, kChunk)), ElemType::kU8,
                              root),
          op);
}

void Communicator::barrier() const {
  BusyTimer busy(busy_seconds_, "barrier", id_.get(), -1, timeline_, 0);
  check_member("barrier");
  if (size_ == 1) return;
  check(backend_->barrier(), "barrier");
}

std::vector<std::vector<char>> Communicator::gather_bytes(const void* data, size_t bytes,
                                                          int root) const {
  const char* op = "gather_bytes";
  check_member(op);
  MT_CHECK(root >= 0 && root < size_, op, " on group '", name_, "': root ", root,
           " is not a rank of this group of size ", size_);
  std::vector<std::vector<char>> out;
  const char* mine = static_cast<const char*>(data);
  if (size_ == 1) {
    out.emplace_back(mine, mine + bytes);
    return out;
  }
  // Every rank's size first (an all-gather), then each rank's bytes to the
  // root point-to-point, in pieces that keep the backend's int counts in range.
  std::vector<int64_t> sizes(size_t(size_), 0);
  const int64_t own = int64_t(bytes);
  {
    WaitScope waiting(op, id_.get());
    check(backend_->all_gather(sizes.data(), &own, 1, ElemType::kI64), op);
  }
  constexpr int kTag = 29;
  constexpr int64_t kPiece = int64_t(1) << 30;
  if (rank_ != root) {
    for (int64_t done = 0; done < own; done += kPiece)
      send(mine + done, std::min(own - done, kPiece), ElemType::kU8, root, kTag);
    return out;
  }
  out.resize(size_t(size_));
  for (int r = 0; r < size_; ++r) {
    std::vector<char>& buf = out[size_t(r)];
    buf.resize(size_t(sizes[size_t(r)]));
    if (r == rank_) {
      if (bytes > 0) std::memcpy(buf.data(), mine, bytes);
      continue;
    }
    for (int64_t done = 0; done < int64_t(buf.size()); done += kPiece)
      recv(buf.data() + done, std::min(int64_t(buf.size()) - done, kPiece), ElemType::kU8, r,
           kTag);
  }
  return out;
}

// ---------------------------------------------------------------- point-to-point

void Communicator::send(const float* x, int64_t n, int peer, int tag) const {
  send(x, n, ElemType::kF32, peer, tag);
}

void Communicator::send(const uint16_t* x, int64_t n, int peer, int tag) const {
  send(x, n, ElemType::kU16, peer, tag);
}

void Communicator::send(const void* x, int64_t n, ElemType type, int peer, int tag) const {
  check_peer("send", peer, tag);
  BusyTimer busy(busy_seconds_, "send", id_.get(), world_ranks_[size_t(peer)], timeline_,
                 n * int64_t(elem_bytes(type)));
  check(backend_->send(x, count("send", n), type, peer, tag), "send");
  sent_bytes_ += n * int64_t(elem_bytes(type));
}

void Communicator::recv(float* x, int64_t n, int peer, int tag) const {
  recv(x, n, ElemType::kF32, peer, tag);
}

void Communicator::recv(uint16_t* x, int64_t n, int peer, int tag) const {
  recv(x, n, ElemType::kU16, peer, tag);
}

void Communicator::recv(void* x, int64_t n, ElemType type, int peer, int tag) const {
  check_peer("recv", peer, tag);
  BusyTimer busy(busy_seconds_, "recv", id_.get(), world_ranks_[size_t(peer)], timeline_,
                 n * int64_t(elem_bytes(type)));
  int64_t got = 0;
  check(backend_->recv(x, count("recv", n), type, peer, tag, &got), "recv");
  MT_CHECK(got == n, "recv on group '", name_, "' from rank ", peer, " tag ", tag, ": got ", got,
           " elements, expected ", n, "; fix: sender and receiver must agree on the message size");
}

CommHandle Communicator::isend(const float* x, int64_t n, int peer, int tag) const {
  return isend(x, n, ElemType::kF32, peer, tag);
}

CommHandle Communicator::isend(const uint16_t* x, int64_t n, int peer, int tag) const {
  return isend(x, n, ElemType::kU16, peer, tag);
}

CommHandle Communicator::isend(const void* x, int64_t n, ElemType type, int peer,
                               int tag) const {
  check_peer("isend", peer, tag);
  const int64_t bytes = n * int64_t(elem_bytes(type));
  TimelineSpan span(timeline_, TimelineKind::kCommStart, "isend",
                    {.peer = world_ranks_[size_t(peer)], .bytes = bytes, .group = name_.c_str()});
  CommBackend::Request req;
  const int rc = backend_->isend(x, count("isend", n), type, peer, tag, &req);
  CommHandle h = handle(rc, std::move(req), "isend", world_ranks_[size_t(peer)], bytes);
  sent_bytes_ += n * int64_t(elem_bytes(type));
  return h;
}

CommHandle Communicator::irecv(float* x, int64_t n, int peer, int tag) const {
  return irecv(x, n, ElemType::kF32, peer, tag);
}

CommHandle Communicator::irecv(uint16_t* x, int64_t n, int peer, int tag) const {
  return irecv(x, n, ElemType::kU16, peer, tag);
}

CommHandle Communicator::irecv(void* x, int64_t n, ElemType type, int peer, int tag) const {
  check_peer("irecv", peer, tag);
  const int64_t bytes = n * int64_t(elem_bytes(type));
  TimelineSpan span(timeline_, TimelineKind::kCommStart, "irecv",
                    {.peer = world_ranks_[size_t(peer)], .bytes = bytes, .group = name_.c_str()});
  CommBackend::Request req;
  const int rc = backend_->irecv(x, count("irecv", n), type, peer, tag, &req);
  return handle(rc, std::move(req), "irecv", world_ranks_[size_t(peer)], bytes);
}

// ---------------------------------------------------------------- non-blocking collectives

CommHandle Communicator::start_all_reduce_sum(float* x, int64_t n) const {
  return start_all_reduce(x, n, ElemType::kF32, ReduceOp::kSum, "start_all_reduce_sum(float)");
}

CommHandle Communicator::start_all_reduce_sum_bf16(uint16_t* x, int64_t n) const {
  return start_all_reduce(x, n, ElemType::kU16, ReduceOp::kBf16Sum, "start_all_reduce_sum_bf16");
}

CommHandle Communicator::start_all_reduce(void* x, int64_t n, ElemType type, ReduceOp op,
                                          const char* what) const {
  check_member(what);
  const int64_t c = count(what, n);
  if (size_ == 1 || c == 0) return CommHandle();
  const int64_t bytes = c * int64_t(elem_bytes(type));
  TimelineSpan span(timeline_, TimelineKind::kCommStart, what,
                    {.bytes = bytes, .group = name_.c_str()});
  CommBackend::Request req;
  const int rc = backend_->start_all_reduce(x, c, type, op, &req);
  return handle(rc, std::move(req), what, -1, bytes);
}

CommHandle Communicator::start_all_gather(float* out, const float* in, int64_t n) const {
  const char* op = "start_all_gather";
  check_member(op);
  const int64_t c = count(op, n * size_);
  const bool in_place = in == out + int64_t(rank_) * n;
  if (size_ == 1 || c == 0) {
    if (!in_place && n > 0) std::memmove(out, in, size_t(n) * sizeof(float));
    return CommHandle();
  }
  MT_CHECK(in_place || !overlaps(out, size_t(c) * 4, in, size_t(n) * 4), op, " on group '", name_,
           "': input overlaps the output but is not this rank's chunk");
  TimelineSpan span(timeline_, TimelineKind::kCommStart, op,
                    {.bytes = c * 4, .group = name_.c_str()});
  CommBackend::Request req;
  const int rc = backend_->start_all_gather(out, in, n, ElemType::kF32, &req);
  return handle(rc, std::move(req), op, -1, c * 4);
}

CommHandle Communicator::start_reduce_scatter_sum(float* out, const float* in, int64_t n) const {
  const char* op = "start_reduce_scatter_sum";
  check_member(op);
  const int64_t c = count(op, n * size_);
  MT_CHECK(!overlaps(out, size_t(n) * 4, in, size_t(c) * 4) || (size_ == 1 && out == in), op,
           " on group '", name_, "': input and output overlap");
  if (size_ == 1 || c == 0) {
    if (out != in && n > 0) std::memcpy(out, in, size_t(n) * sizeof(float));
    return CommHandle();
  }
  TimelineSpan span(timeline_, TimelineKind::kCommStart, op,
                    {.bytes = c * 4, .group = name_.c_str()});
  CommBackend::Request req;
  const int rc = backend_->start_reduce_scatter(out, in, n, ElemType::kF32, ReduceOp::kSum, &req);
  return handle(rc, std::move(req), op, -1, c * 4);
}

CommHandle Communicator::start_reduce_scatter_sum_in_place(float* x,
                                                            const ChunkSplit& split) const {
  return start_reduce_scatter_in_place(x, split, ElemType::kF32, ReduceOp::kSum,
                                       "start_reduce_scatter_sum_in_place");
}

CommHandle Communicator::start_reduce_scatter_sum_bf16_in_place(uint16_t* x,
                                                                 const ChunkSplit& split) const {
  return start_reduce_scatter_in_place(x, split, ElemType::kU16, ReduceOp::kBf16Sum,
                                       "start_reduce_scatter_sum_bf16_in_place");
}

CommHandle Communicator::start_reduce_scatter_in_place(void* x, const ChunkSplit& split,
                                                       ElemType type, ReduceOp op,
                                                       const char* what) const {
  check_split(what, split);
  if (size_ == 1 || split.total() == 0) return CommHandle();
  const int64_t bytes = split.total() * int64_t(elem_bytes(type));
  TimelineSpan span(timeline_, TimelineKind::kCommStart, what,
                    {.bytes = bytes, .group = name_.c_str()});
  CommBackend::Request req;
  const int rc = backend_->start_reduce_scatter_in_place(x, split, type, op, &req);
  return handle(rc, std::move(req), what, -1, bytes);
}

CommHandle Communicator::start_all_gather_in_place(float* x, const ChunkSplit& split) const {
  return start_all_gather_in_place(x, split, ElemType::kF32);
}

CommHandle Communicator::start_all_gather_in_place(uint16_t* x, const ChunkSplit& split) const {
  return start_all_gather_in_place(x, split, ElemType::kU16);
}

CommHandle Communicator::start_all_gather_in_place(void* x, const ChunkSplit& split,
                                                   ElemType type) const {
  const char* op = "start_all_gather_in_place";
  check_split(op, split);
  if (size_ == 1 || split.total() == 0) return CommHandle();
  const int64_t bytes = split.total() * int64_t(elem_bytes(type));
  TimelineSpan span(timeline_, TimelineKind::kCommStart, op,
                    {.bytes = bytes, .group = name_.c_str()});
  CommBackend::Request req;
  const int rc = backend_->start_all_gather_in_place(x, split, type, &req);
  return handle(rc, std::move(req), op, -1, bytes);
}

}  // namespace mt
