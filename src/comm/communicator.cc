#include "comm/communicator.h"

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <exception>

#include "core/error.h"
#include "comm/bf16_sum.h"
#include "comm/mpi_env.h"

namespace mt {
namespace {

// A blocking MPI call: adds the wall time of its scope to a counter and
// arms the watchdog (dist/watchdog.h) with the operation and the group.
class BusyTimer {
 public:
  BusyTimer(double& acc, const char* op, const GroupId* group, int peer = -1)
      : wait_(op, group, peer), acc_(acc), t0_(std::chrono::steady_clock::now()) {}
  ~BusyTimer() {
    acc_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

 private:
  WaitScope wait_;
  double& acc_;
  std::chrono::steady_clock::time_point t0_;
};

bool overlaps(const void* a, size_t abytes, const void* b, size_t bbytes) {
  const char* pa = static_cast<const char*>(a);
  const char* pb = static_cast<const char*>(b);
  return pa < pb + bbytes && pb < pa + abytes;
}

}  // namespace

void check_mpi(int rc, const char* op, const std::string& group) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
    std::snprintf(msg, sizeof(msg), "code %d", rc);
  MT_FAIL("MPI ", op, " on group '", group, "' failed: ", msg,
          "; fix: see the first error of the job (another rank may have failed first)");
}

// ---------------------------------------------------------------- CommHandle

CommHandle::~CommHandle() {
  if (!pending()) return;
  try {
    wait();
  } catch (const Error& e) {
    abort_job(e.what());  // a destructor cannot throw; end the job instead
  }
}

CommHandle::CommHandle(CommHandle&& o) noexcept
    : req_(std::exchange(o.req_, MPI_REQUEST_NULL)),
      move_dst_(std::exchange(o.move_dst_, nullptr)),
      move_src_(std::exchange(o.move_src_, nullptr)),
      move_bytes_(std::exchange(o.move_bytes_, 0)),
      op_(o.op_),
      group_(std::move(o.group_)),
      peer_(o.peer_) {}

CommHandle& CommHandle::operator=(CommHandle&& o) noexcept {
  if (this != &o) {
    if (pending()) {
      try {
        wait();
      } catch (const Error& e) {
        abort_job(e.what());
      }
    }
    req_ = std::exchange(o.req_, MPI_REQUEST_NULL);
    move_dst_ = std::exchange(o.move_dst_, nullptr);
    move_src_ = std::exchange(o.move_src_, nullptr);
    move_bytes_ = std::exchange(o.move_bytes_, 0);
    op_ = o.op_;
    group_ = std::move(o.group_);
    peer_ = o.peer_;
  }
  return *this;
}

void CommHandle::wait() {
  if (!pending()) return;
  int rc;
  {
    WaitScope waiting(op_, group_.get(), peer_);
    rc = MPI_Wait(&req_, MPI_STATUS_IGNORE);
  }
  req_ = MPI_REQUEST_NULL;
  check_mpi(rc, op_, group_->name);
  complete();
}

bool CommHandle::test() {
  if (!pending()) return true;
  int done = 0;
  const int rc = MPI_Test(&req_, &done, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) req_ = MPI_REQUEST_NULL;
  check_mpi(rc, op_, group_->name);
  if (done) complete();
  return done != 0;
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

// ---------------------------------------------------------------- ChunkSplit

ChunkSplit chunk_split(const std::vector<int64_t>& counts) {
  ChunkSplit s;
  int64_t at = 0;
  for (int64_t c : counts) {
    MT_CHECK(c >= 0 && at + c <= INT_MAX, "chunk_split: chunk of ", c, " floats at offset ", at,
             " does not fit an MPI count (0 .. ", INT_MAX,
             "); fix: use smaller buckets (--ddp-bucket-size)");
    s.counts.push_back(int(c));
    s.displs.push_back(int(at));
    at += c;
  }
  return s;
}

// ---------------------------------------------------------------- Communicator

Communicator::Communicator(MPI_Comm comm, std::string name, bool owns)
    : comm_(comm), name_(std::move(name)), owns_(owns) {
  if (comm_ == MPI_COMM_NULL) return;
  check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "Comm_set_errhandler", name_);
  check_mpi(MPI_Comm_rank(comm_, &rank_), "Comm_rank", name_);
  check_mpi(MPI_Comm_size(comm_, &size_), "Comm_size", name_);
  void* ub = nullptr;
  int flag = 0;
  check_mpi(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &ub, &flag), "Comm_get_attr(TAG_UB)", name_);
  if (flag && ub) tag_ub_ = *static_cast<int*>(ub);
  // This group's members as world ranks, for the watchdog's messages.
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  check_mpi(MPI_Comm_group(comm_, &group), "Comm_group", name_);
  check_mpi(MPI_Comm_group(MPI_COMM_WORLD, &world), "Comm_group", "world");
  std::vector<int> ranks(size_t(size_), 0);
  for (int r = 0; r < size_; ++r) ranks[size_t(r)] = r;
  world_ranks_.assign(size_t(size_), -1);
  check_mpi(MPI_Group_translate_ranks(group, size_, ranks.data(), world, world_ranks_.data()),
            "Group_translate_ranks", name_);
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  id_ = std::make_shared<const GroupId>(
      GroupId{name_, describe_members(world_ranks_.data(), size_)});
}

Communicator Communicator::world() {
  MT_CHECK(mpi_running(), "Communicator::world() needs MPI; fix: construct mt::MpiEnv first");
  MPI_Comm dup = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "Comm_dup", "world");
  return Communicator(dup, "world", true);
}

Communicator::~Communicator() {
  // MPI_Comm_free is collective: while an error unwinds this rank alone, the
  // others are not here, so freeing would hang; the job is about to be aborted.
  if (std::uncaught_exceptions() > 0) return;
  if (owns_ && comm_ != MPI_COMM_NULL && mpi_running()) MPI_Comm_free(&comm_);
}

Communicator::Communicator(Communicator&& o) noexcept
    : comm_(std::exchange(o.comm_, MPI_COMM_NULL)),
      id_(std::move(o.id_)),
      world_ranks_(std::move(o.world_ranks_)),
      name_(std::move(o.name_)),
      rank_(std::exchange(o.rank_, -1)),
      size_(std::exchange(o.size_, 0)),
      tag_ub_(o.tag_ub_),
      owns_(std::exchange(o.owns_, false)) {}

Communicator& Communicator::operator=(Communicator&& o) noexcept {
  if (this != &o) {
    if (owns_ && comm_ != MPI_COMM_NULL && mpi_running()) MPI_Comm_free(&comm_);
    comm_ = std::exchange(o.comm_, MPI_COMM_NULL);
    id_ = std::move(o.id_);
    world_ranks_ = std::move(o.world_ranks_);
    name_ = std::move(o.name_);
    rank_ = std::exchange(o.rank_, -1);
    size_ = std::exchange(o.size_, 0);
    tag_ub_ = o.tag_ub_;
    owns_ = std::exchange(o.owns_, false);
  }
  return *this;
}

void Communicator::check_member(const char* op) const {
  MT_CHECK(size_ > 0, op, " on group '", name_,
           "': this rank is not a member of the group (null communicator); fix: guard the call "
           "with is_member()");
}

int Communicator::count(const char* op, int64_t n) const {
  MT_CHECK(n >= 0 && n <= INT_MAX, op, " on group '", name_, "': element count ", n,
           " is not in [0, ", INT_MAX, "]; fix: split the buffer into smaller calls");
  return int(n);
}

void Communicator::check_peer(const char* op, int peer, int tag) const {
  check_member(op);
  MT_CHECK(peer >= 0 && peer < size_, op, " on group '", name_, "': peer ", peer,
           " is not a rank of this group of size ", size_);
  MT_CHECK(tag >= 0 && tag <= tag_ub_, op, " on group '", name_, "': tag ", tag, " not in [0, ",
           tag_ub_, "]");
}

void Communicator::all_reduce(void* x, int64_t n, MPI_Datatype type, MPI_Op op,
                              const char* what) const {
  BusyTimer busy(busy_seconds_, what, id_.get());
  all_reduce_chunked(x, n, type, op, what);
}

void Communicator::all_reduce_chunked(void* x, int64_t n, MPI_Datatype type, MPI_Op op,
                                      const char* what) const {
  check_member(what);
  MT_CHECK(n >= 0, what, " on group '", name_, "': negative element count ", n);
  if (size_ == 1 || n == 0) return;
  int type_size = 0;
  MPI_Type_size(type, &type_size);
  // In chunks of at most kReduceChunkBytes (which also keeps MPI's int
  // counts in range): one 38.6M-float all-reduce (GPT-2's word embedding)
  // takes ~400 ms over Open MPI's shared memory on these machines, the same
  // floats in 1M-float chunks ~26 ms (bench/README.md, "Collectives").
  const int64_t kChunk = kReduceChunkBytes / type_size;
  char* p = static_cast<char*>(x);
  for (int64_t done = 0; done < n; done += kChunk) {
    const int c = int(n - done < kChunk ? n - done : kChunk);
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, p + done * type_size, c, type, op, comm_), what, name_);
  }
}

void Communicator::all_reduce_sum(float* x, int64_t n) const {
  all_reduce(x, n, MPI_FLOAT, MPI_SUM, "all_reduce_sum(float)");
}
void Communicator::all_reduce_sum(double* x, int64_t n) const {
  all_reduce(x, n, MPI_DOUBLE, MPI_SUM, "all_reduce_sum(double)");
}
void Communicator::all_reduce_sum(int64_t* x, int64_t n) const {
  all_reduce(x, n, MPI_INT64_T, MPI_SUM, "all_reduce_sum(int64)");
}
void Communicator::all_reduce_max(float* x, int64_t n) const {
  all_reduce(x, n, MPI_FLOAT, MPI_MAX, "all_reduce_max(float)");
}
void Communicator::all_reduce_max(double* x, int64_t n) const {
  all_reduce(x, n, MPI_DOUBLE, MPI_MAX, "all_reduce_max(double)");
}
void Communicator::all_reduce_max(int* x, int64_t n) const {
  all_reduce(x, n, MPI_INT, MPI_MAX, "all_reduce_max(int)");
}

void Communicator::all_gather(float* out, const float* in, int64_t n) const {
  all_gather(out, in, n, MPI_FLOAT, sizeof(float));
}

void Communicator::all_gather(uint16_t* out, const uint16_t* in, int64_t n) const {
  all_gather(out, in, n, MPI_UINT16_T, sizeof(uint16_t));
}

void Communicator::all_gather(void* out_v, const void* in_v, int64_t n, MPI_Datatype type,
                              size_t elem) const {
  BusyTimer busy(busy_seconds_, "all_gather", id_.get());
  check_member("all_gather");
  char* out = static_cast<char*>(out_v);
  const char* in = static_cast<const char*>(in_v);
  const int c = count("all_gather", n * size_);
  const bool in_place = in == out + int64_t(rank_) * n * int64_t(elem);
  if (size_ == 1 || c == 0) {
    if (!in_place && n > 0) std::memmove(out, in, size_t(n) * elem);
    return;
  }
  MT_CHECK(in_place || !overlaps(out, size_t(c) * elem, in, size_t(n) * elem),
           "all_gather on group '", name_,
           "': input overlaps the output but is not this rank's chunk; fix: pass "
           "in == out + rank * n or separate buffers");
  check_mpi(MPI_Allgather(in_place ? MPI_IN_PLACE : in, int(n), type, out, int(n), type, comm_),
            "all_gather", name_);
}

void Communicator::reduce_scatter_sum(float* out, const float* in, int64_t n) const {
  BusyTimer busy(busy_seconds_, "reduce_scatter_sum", id_.get());
  check_member("reduce_scatter_sum");
  const int c = count("reduce_scatter_sum", n * size_);
  MT_CHECK(!overlaps(out, size_t(n) * 4, in, size_t(c) * 4) || (size_ == 1 && out == in),
           "reduce_scatter_sum on group '", name_,
           "': input and output overlap; fix: reduce into a separate buffer");
  if (size_ == 1 || c == 0) {
    if (out != in && n > 0) std::memcpy(out, in, size_t(n) * sizeof(float));
    return;
  }
  // MPI_Reduce_scatter with equal counts, not MPI_Reduce_scatter_block: Open
  // MPI 4.1's block variant took 15-25 ms for 3-4 MB over shared memory here
  // (SP's activations; 0.5 ms only after some all-reduces), the counted one
  // 0.3-0.6 ms (the DP buckets' call).
  thread_local std::vector<int> counts;
  counts.assign(size_t(size_), int(n));
  check_mpi(MPI_Reduce_scatter(in, out, counts.data(), MPI_FLOAT, MPI_SUM, comm_),
            "reduce_scatter_sum", name_);
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

void Communicator::reduce_scatter_sum_in_place(float* x, const ChunkSplit& split) const {
  reduce_scatter_in_place(x, split, MPI_FLOAT, MPI_SUM, sizeof(float),
                          "reduce_scatter_sum_in_place");
}

void Communicator::reduce_scatter_sum_bf16_in_place(uint16_t* x, const ChunkSplit& split) const {
  reduce_scatter_in_place(x, split, MPI_UINT16_T, bf16_sum_op(), sizeof(uint16_t),
                          "reduce_scatter_sum_bf16_in_place");
}

void Communicator::all_reduce_sum_bf16(uint16_t* x, int64_t n) const {
  all_reduce(x, n, MPI_UINT16_T, bf16_sum_op(), "all_reduce_sum_bf16");
}

void Communicator::reduce_scatter_in_place(void* x, const ChunkSplit& split, MPI_Datatype type,
                                           MPI_Op op, size_t elem, const char* what) const {
  BusyTimer busy(busy_seconds_, what, id_.get());
  check_split(what, split);
  if (size_ == 1 || split.total() == 0) return;
  if (split.total() * int64_t(elem) > kReduceChunkBytes) {
    // Open MPI's reduce-scatter of one large buffer is slower still than its
    // all-reduce (~760 ms for 38.6M floats here); a chunked all-reduce leaves
    // the sum everywhere, this rank's chunk included.
    all_reduce_chunked(x, split.total(), type, op, what);
    return;
  }
  check_mpi(MPI_Reduce_scatter(MPI_IN_PLACE, x, split.counts.data(), type, op, comm_), what,
            name_);
  // MPI puts the in-place result at the start of the buffer.
  const size_t r = size_t(rank_);
  if (split.counts[r] > 0 && split.displs[r] > 0) {
    char* p = static_cast<char*>(x);
    std::memmove(p + size_t(split.displs[r]) * elem, p, size_t(split.counts[r]) * elem);
  }
}

void Communicator::all_gather_in_place(float* x, const ChunkSplit& split) const {
  all_gather_in_place(static_cast<void*>(x), split, MPI_FLOAT);
}

void Communicator::all_gather_in_place(uint16_t* x, const ChunkSplit& split) const {
  all_gather_in_place(static_cast<void*>(x), split, MPI_UINT16_T);
}

void Communicator::all_gather_in_place(void* x, const ChunkSplit& split, MPI_Datatype type) const {
  BusyTimer busy(busy_seconds_, "all_gather_in_place", id_.get());
  const char* op = "all_gather_in_place";
  check_split(op, split);
  if (size_ == 1 || split.total() == 0) return;
  check_mpi(MPI_Allgatherv(MPI_IN_PLACE, 0, type, x, split.counts.data(), split.displs.data(),
                           type, comm_),
            op, name_);
}

void Communicator::all_to_all_v(float* out, const ChunkSplit& recv_split, const float* in,
                                const ChunkSplit& send_split) const {
  all_to_all_v(out, recv_split, in, send_split, MPI_FLOAT, sizeof(float));
}

void Communicator::all_to_all_v(uint16_t* out, const ChunkSplit& recv_split, const uint16_t* in,
                                const ChunkSplit& send_split) const {
  all_to_all_v(out, recv_split, in, send_split, MPI_UINT16_T, sizeof(uint16_t));
}

void Communicator::all_to_all_v(void* out, const ChunkSplit& recv_split, const void* in,
                                const ChunkSplit& send_split, MPI_Datatype type,
                                size_t elem) const {
  BusyTimer busy(busy_seconds_, "all_to_all_v", id_.get());
  const char* op = "all_to_all_v";
  check_split(op, send_split);
  check_split(op, recv_split);
  if (size_ == 1) {
    MT_CHECK(send_split.total() == recv_split.total(), op, " on group '", name_, "': sends ",
             send_split.total(), " elements to itself but receives ", recv_split.total());
    if (send_split.total() > 0) std::memmove(out, in, size_t(send_split.total()) * elem);
    return;
  }
  check_mpi(MPI_Alltoallv(in, send_split.counts.data(), send_split.displs.data(), type, out,
                          recv_split.counts.data(), recv_split.displs.data(), type, comm_),
            op, name_);
}

std::vector<int64_t> Communicator::all_to_all_counts(const std::vector<int64_t>& send) const {
  BusyTimer busy(busy_seconds_, "all_to_all_counts", id_.get());
  check_member("all_to_all_counts");
  MT_CHECK(int(send.size()) == size_, "all_to_all_counts on group '", name_, "': ", send.size(),
           " counts for a group of ", size_);
  std::vector<int64_t> recv(send.size(), 0);
  if (size_ == 1) return send;
  check_mpi(MPI_Alltoall(send.data(), 1, MPI_INT64_T, recv.data(), 1, MPI_INT64_T, comm_),
            "all_to_all_counts", name_);
  return recv;
}

void Communicator::broadcast(void* data, size_t bytes, int root) const {
  BusyTimer busy(busy_seconds_, "broadcast", id_.get());
  check_member("broadcast");
  MT_CHECK(root >= 0 && root < size_, "broadcast on group '", name_, "': root ", root,
           " is not a rank of this group of size ", size_);
  if (size_ == 1) return;
  constexpr size_t kChunk = size_t(1) << 30;
  char* p = static_cast<char*>(data);
  for (size_t done = 0; done < bytes; done += kChunk) {
    const int c = int(bytes - done < kChunk ? bytes - done : kChunk);
    check_mpi(MPI_Bcast(p + done, c, MPI_BYTE, root, comm_), "broadcast", name_);
  }
}

void Communicator::barrier() const {
  BusyTimer busy(busy_seconds_, "barrier", id_.get());
  check_member("barrier");
  if (size_ == 1) return;
  check_mpi(MPI_Barrier(comm_), "barrier", name_);
}

void Communicator::send(const float* x, int64_t n, int peer, int tag) const {
  send(x, n, MPI_FLOAT, peer, tag);
}

void Communicator::send(const uint16_t* x, int64_t n, int peer, int tag) const {
  send(x, n, MPI_UINT16_T, peer, tag);
}

int64_t Communicator::type_bytes(MPI_Datatype type) const {
  int size = 0;
  check_mpi(MPI_Type_size(type, &size), "MPI_Type_size", name_);
  return size;
}

void Communicator::send(const void* x, int64_t n, MPI_Datatype type, int peer, int tag) const {
  check_peer("send", peer, tag);
  BusyTimer busy(busy_seconds_, "send", id_.get(), world_ranks_[size_t(peer)]);
  check_mpi(MPI_Send(x, count("send", n), type, peer, tag, comm_), "send", name_);
  sent_bytes_ += n * type_bytes(type);
}

void Communicator::recv(float* x, int64_t n, int peer, int tag) const {
  recv(x, n, MPI_FLOAT, peer, tag);
}

void Communicator::recv(uint16_t* x, int64_t n, int peer, int tag) const {
  recv(x, n, MPI_UINT16_T, peer, tag);
}

void Communicator::recv(void* x, int64_t n, MPI_Datatype type, int peer, int tag) const {
  check_peer("recv", peer, tag);
  BusyTimer busy(busy_seconds_, "recv", id_.get(), world_ranks_[size_t(peer)]);
  MPI_Status status;
  check_mpi(MPI_Recv(x, count("recv", n), type, peer, tag, comm_, &status), "recv", name_);
  int got = 0;
  MPI_Get_count(&status, type, &got);
  MT_CHECK(got == n, "recv on group '", name_, "' from rank ", peer, " tag ", tag, ": got ", got,
           " elements, expected ", n, "; fix: sender and receiver must agree on the message size");
}

CommHandle Communicator::start_all_reduce_sum(float* x, int64_t n) const {
  return start_all_reduce(x, n, MPI_FLOAT, MPI_SUM, "start_all_reduce_sum(float)");
}

CommHandle Communicator::start_all_reduce_sum_bf16(uint16_t* x, int64_t n) const {
  return start_all_reduce(x, n, MPI_UINT16_T, bf16_sum_op(), "start_all_reduce_sum_bf16");
}

CommHandle Communicator::start_all_reduce(void* x, int64_t n, MPI_Datatype type, MPI_Op op,
                                          const char* what) const {
  check_member(what);
  const int c = count(what, n);
  if (size_ == 1 || c == 0) return CommHandle();
  MPI_Request req;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, x, c, type, op, comm_, &req), what, name_);
  return CommHandle(req, what, id_);
}

CommHandle Communicator::start_all_gather(float* out, const float* in, int64_t n) const {
  const char* op = "start_all_gather";
  check_member(op);
  const int c = count(op, n * size_);
  const bool in_place = in == out + int64_t(rank_) * n;
  if (size_ == 1 || c == 0) {
    if (!in_place && n > 0) std::memmove(out, in, size_t(n) * sizeof(float));
    return CommHandle();
  }
  MT_CHECK(in_place || !overlaps(out, size_t(c) * 4, in, size_t(n) * 4), op, " on group '", name_,
           "': input overlaps the output but is not this rank's chunk");
  MPI_Request req;
  check_mpi(MPI_Iallgather(in_place ? MPI_IN_PLACE : in, int(n), MPI_FLOAT, out, int(n), MPI_FLOAT,
                           comm_, &req),
            op, name_);
  return CommHandle(req, op, id_);
}

CommHandle Communicator::start_reduce_scatter_sum(float* out, const float* in, int64_t n) const {
  const char* op = "start_reduce_scatter_sum";
  check_member(op);
  const int c = count(op, n * size_);
  MT_CHECK(!overlaps(out, size_t(n) * 4, in, size_t(c) * 4) || (size_ == 1 && out == in), op,
           " on group '", name_, "': input and output overlap");
  if (size_ == 1 || c == 0) {
    if (out != in && n > 0) std::memcpy(out, in, size_t(n) * sizeof(float));
    return CommHandle();
  }
  MPI_Request req;
  check_mpi(MPI_Ireduce_scatter_block(in, out, int(n), MPI_FLOAT, MPI_SUM, comm_, &req), op, name_);
  return CommHandle(req, op, id_);
}

CommHandle Communicator::start_reduce_scatter_sum_in_place(float* x,
                                                            const ChunkSplit& split) const {
  return start_reduce_scatter_in_place(x, split, MPI_FLOAT, MPI_SUM, sizeof(float),
                                       "start_reduce_scatter_sum_in_place");
}

CommHandle Communicator::start_reduce_scatter_sum_bf16_in_place(uint16_t* x,
                                                                 const ChunkSplit& split) const {
  return start_reduce_scatter_in_place(x, split, MPI_UINT16_T, bf16_sum_op(), sizeof(uint16_t),
                                       "start_reduce_scatter_sum_bf16_in_place");
}

CommHandle Communicator::start_reduce_scatter_in_place(void* x, const ChunkSplit& split,
                                                       MPI_Datatype type, MPI_Op op, size_t elem,
                                                       const char* what) const {
  check_split(what, split);
  if (size_ == 1 || split.total() == 0) return CommHandle();
  MPI_Request req;
  check_mpi(MPI_Ireduce_scatter(MPI_IN_PLACE, x, split.counts.data(), type, op, comm_, &req), what,
            name_);
  CommHandle h(req, what, id_);
  const size_t r = size_t(rank_);
  char* p = static_cast<char*>(x);  // MPI's in-place result is at x[0]
  h.then_move_bytes(p + size_t(split.displs[r]) * elem, p, split.counts[r], elem);
  return h;
}

CommHandle Communicator::start_all_gather_in_place(float* x, const ChunkSplit& split) const {
  return start_all_gather_in_place(static_cast<void*>(x), split, MPI_FLOAT);
}

CommHandle Communicator::start_all_gather_in_place(uint16_t* x, const ChunkSplit& split) const {
  return start_all_gather_in_place(static_cast<void*>(x), split, MPI_UINT16_T);
}

CommHandle Communicator::start_all_gather_in_place(void* x, const ChunkSplit& split,
                                                   MPI_Datatype type) const {
  const char* op = "start_all_gather_in_place";
  check_split(op, split);
  if (size_ == 1 || split.total() == 0) return CommHandle();
  MPI_Request req;
  check_mpi(MPI_Iallgatherv(MPI_IN_PLACE, 0, type, x, split.counts.data(), split.displs.data(),
                            type, comm_, &req),
            op, name_);
  return CommHandle(req, op, id_);
}

CommHandle Communicator::isend(const float* x, int64_t n, int peer, int tag) const {
  return isend(x, n, MPI_FLOAT, peer, tag);
}

CommHandle Communicator::isend(const uint16_t* x, int64_t n, int peer, int tag) const {
  return isend(x, n, MPI_UINT16_T, peer, tag);
}

CommHandle Communicator::isend(const void* x, int64_t n, MPI_Datatype type, int peer,
                               int tag) const {
  check_peer("isend", peer, tag);
  MPI_Request req;
  check_mpi(MPI_Isend(x, count("isend", n), type, peer, tag, comm_, &req), "isend", name_);
  sent_bytes_ += n * type_bytes(type);
  return CommHandle(req, "isend", id_, world_ranks_[size_t(peer)]);
}

CommHandle Communicator::irecv(float* x, int64_t n, int peer, int tag) const {
  return irecv(x, n, MPI_FLOAT, peer, tag);
}

CommHandle Communicator::irecv(uint16_t* x, int64_t n, int peer, int tag) const {
  return irecv(x, n, MPI_UINT16_T, peer, tag);
}

CommHandle Communicator::irecv(void* x, int64_t n, MPI_Datatype type, int peer, int tag) const {
  check_peer("irecv", peer, tag);
  MPI_Request req;
  check_mpi(MPI_Irecv(x, count("irecv", n), type, peer, tag, comm_, &req), "irecv", name_);
  return CommHandle(req, "irecv", id_, world_ranks_[size_t(peer)]);
}

}  // namespace mt
