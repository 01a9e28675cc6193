#include "comm/mpi_backend.h"

#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

#include "comm/bf16_sum.h"
#include "comm/mpi_env.h"
#include "core/error.h"

namespace mt {
namespace {

MPI_Datatype mpi_type(ElemType type) {
  switch (type) {
    case ElemType::kF32:
      return MPI_FLOAT;
    case ElemType::kF64:
      return MPI_DOUBLE;
    case ElemType::kI64:
      return MPI_INT64_T;
    case ElemType::kI32:
      return MPI_INT;
    case ElemType::kU16:
      return MPI_UINT16_T;
    case ElemType::kU8:
      return MPI_BYTE;
  }
  MT_FAIL("unknown element type ", int(type));
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return MPI_SUM;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kBf16Sum:
      return bf16_sum_op();
  }
  MT_FAIL("unknown reduction ", int(op));
}

// One MPI_Request, and a move to run once it completes: MPI leaves the
// result of an in-place reduce-scatter at the start of the buffer, the
// backend contract wants it in this rank's chunk.
class MpiRequest final : public CommRequest {
 public:
  explicit MpiRequest(MPI_Request req) : req_(req) {}
  void then_move(char* dst, const char* src, size_t bytes) {
    dst_ = dst;
    src_ = src;
    bytes_ = bytes;
  }
  int wait() override {
    const int rc = MPI_Wait(&req_, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS) complete();
    return rc;
  }
  int test(bool* done) override {
    int flag = 0;
    const int rc = MPI_Test(&req_, &flag, MPI_STATUS_IGNORE);
    *done = flag != 0;
    if (rc == MPI_SUCCESS && flag) complete();
    return rc;
  }
  std::string error_text(int code) const override { return mpi_error_text(code); }

 private:
  void complete() {
    if (bytes_ > 0 && dst_ != src_) std::memmove(dst_, src_, bytes_);
    bytes_ = 0;
  }

  MPI_Request req_;
  char* dst_ = nullptr;
  const char* src_ = nullptr;
  size_t bytes_ = 0;
};

// Hands out the request of a call that started (rc == MPI_SUCCESS). `r` is
// a reference: read after the call in the same expression has written it.
int started(int rc, const MPI_Request& r, CommBackend::Request* req) {
  if (rc == MPI_SUCCESS) *req = std::make_unique<MpiRequest>(r);
  return rc;
}

class MpiBackend final : public CommBackend {
 public:
  explicit MpiBackend(MPI_Comm comm);  // takes ownership of comm
  ~MpiBackend() override;
  MpiBackend(const MpiBackend&) = delete;
  MpiBackend& operator=(const MpiBackend&) = delete;

  const char* kind() const override { return "MPI"; }
  std::string error_text(int code) const override { return mpi_error_text(code); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::vector<int> world_ranks() const override { return world_ranks_; }
  int max_tag() const override { return tag_ub_; }
  int split(int color, int key, std::unique_ptr<CommBackend>* out) override;
  std::string processor_name() const override;

  int all_reduce(void* x, int64_t n, ElemType type, ReduceOp op) override {
    return MPI_Allreduce(MPI_IN_PLACE, x, int(n), mpi_type(type), mpi_op(op), comm_);
  }
  int all_gather(void* out, const void* in, int64_t n, ElemType type) override {
    const MPI_Datatype t = mpi_type(type);
    return MPI_Allgather(in_place(out, in, n, type) ? MPI_IN_PLACE : in, int(n), t, out, int(n),
                         t, comm_);
  }
  int reduce_scatter(void* out, const void* in, int64_t n, ElemType type, ReduceOp op) override;
  int reduce_scatter_in_place(void* x, const ChunkSplit& split, ElemType type,
                              ReduceOp op) override;
  int all_gather_in_place(void* x, const ChunkSplit& split, ElemType type) override {
    const MPI_Datatype t = mpi_type(type);
    return MPI_Allgatherv(MPI_IN_PLACE, 0, t, x, split.counts.data(), split.displs.data(), t,
                          comm_);
  }
  int all_to_all_v(void* out, const ChunkSplit& recv_split, const void* in,
                   const ChunkSplit& send_split, ElemType type) override {
    const MPI_Datatype t = mpi_type(type);
    return MPI_Alltoallv(in, send_split.counts.data(), send_split.displs.data(), t, out,
                         recv_split.counts.data(), recv_split.displs.data(), t, comm_);
  }
  int broadcast(void* data, int64_t n, ElemType type, int root) override {
    return MPI_Bcast(data, int(n), mpi_type(type), root, comm_);
  }
  int barrier() override { return MPI_Barrier(comm_); }
  int send(const void* x, int64_t n, ElemType type, int peer, int tag) override {
    return MPI_Send(x, int(n), mpi_type(type), peer, tag, comm_);
  }
  int recv(void* x, int64_t n, ElemType type, int peer, int tag, int64_t* received) override;

  int start_all_reduce(void* x, int64_t n, ElemType type, ReduceOp op, Request* req) override {
    MPI_Request r;
    return started(MPI_Iallreduce(MPI_IN_PLACE, x, int(n), mpi_type(type), mpi_op(op), comm_, &r),
                   r, req);
  }
  int start_all_gather(void* out, const void* in, int64_t n, ElemType type,
                       Request* req) override {
    const MPI_Datatype t = mpi_type(type);
    MPI_Request r;
    return started(MPI_Iallgather(in_place(out, in, n, type) ? MPI_IN_PLACE : in, int(n), t, out,
                                  int(n), t, comm_, &r),
                   r, req);
  }
  int start_reduce_scatter(void* out, const void* in, int64_t n, ElemType type, ReduceOp op,
                           Request* req) override {
    MPI_Request r;
    return started(
        MPI_Ireduce_scatter_block(in, out, int(n), mpi_type(type), mpi_op(op), comm_, &r), r, req);
  }
  int start_reduce_scatter_in_place(void* x, const ChunkSplit& split, ElemType type, ReduceOp op,
                                    Request* req) override;
  int start_all_gather_in_place(void* x, const ChunkSplit& split, ElemType type,
                                Request* req) override {
    const MPI_Datatype t = mpi_type(type);
    MPI_Request r;
    return started(MPI_Iallgatherv(MPI_IN_PLACE, 0, t, x, split.counts.data(),
                                   split.displs.data(), t, comm_, &r),
                   r, req);
  }
  int isend(const void* x, int64_t n, ElemType type, int peer, int tag, Request* req) override {
    MPI_Request r;
    return started(MPI_Isend(x, int(n), mpi_type(type), peer, tag, comm_, &r), r, req);
  }
  int irecv(void* x, int64_t n, ElemType type, int peer, int tag, Request* req) override {
    MPI_Request r;
    return started(MPI_Irecv(x, int(n), mpi_type(type), peer, tag, comm_, &r), r, req);
  }

 private:
  // Whether `in` is this rank's chunk of `out` (MPI_IN_PLACE).
  bool in_place(const void* out, const void* in, int64_t n, ElemType type) const {
    return in == static_cast<const char*>(out) + int64_t(rank_) * n * int64_t(elem_bytes(type));
  }

  MPI_Comm comm_;
  std::vector<int> world_ranks_;  // of this group's ranks, in group order
  int rank_ = -1;
  int size_ = 0;
  int tag_ub_ = 32767;  // largest valid tag (MPI_TAG_UB), at least 32767
};

MpiBackend::MpiBackend(MPI_Comm comm) : comm_(comm) {
  // The group's name is the Communicator's, not known here: "-" in messages.
  check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "Comm_set_errhandler", "-");
  check_mpi(MPI_Comm_rank(comm_, &rank_), "Comm_rank", "-");
  check_mpi(MPI_Comm_size(comm_, &size_), "Comm_size", "-");
  void* ub = nullptr;
  int flag = 0;
  check_mpi(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &ub, &flag), "Comm_get_attr(TAG_UB)", "-");
  if (flag && ub) tag_ub_ = *static_cast<int*>(ub);
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  check_mpi(MPI_Comm_group(comm_, &group), "Comm_group", "-");
  check_mpi(MPI_Comm_group(MPI_COMM_WORLD, &world), "Comm_group", "world");
  std::vector<int> ranks(size_t(size_), 0);
  for (int r = 0; r < size_; ++r) ranks[size_t(r)] = r;
  world_ranks_.assign(size_t(size_), -1);
  check_mpi(MPI_Group_translate_ranks(group, size_, ranks.data(), world, world_ranks_.data()),
            "Group_translate_ranks", "-");
  MPI_Group_free(&group);
  MPI_Group_free(&world);
}

MpiBackend::~MpiBackend() {
  // MPI_Comm_free is collective: while an error unwinds this rank alone, the
  // others are not here, so freeing would hang; the job is about to be aborted.
  if (std::uncaught_exceptions() > 0) return;
  if (comm_ != MPI_COMM_NULL && mpi_running()) MPI_Comm_free(&comm_);
}

int MpiBackend::split(int color, int key, std::unique_ptr<CommBackend>* out) {
  MPI_Comm comm = MPI_COMM_NULL;
  const int rc = MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &comm);
  if (rc == MPI_SUCCESS && comm != MPI_COMM_NULL) *out = std::make_unique<MpiBackend>(comm);
  return rc;
}

std::string MpiBackend::processor_name() const {
  char name[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  check_mpi(MPI_Get_processor_name(name, &len), "Get_processor_name", "-");
  return std::string(name, size_t(len));
}

int MpiBackend::reduce_scatter(void* out, const void* in, int64_t n, ElemType type, ReduceOp op) {
  // MPI_Reduce_scatter with equal counts, not MPI_Reduce_scatter_block: Open
  // MPI 4.1's block variant took 15-25 ms for 3-4 MB over shared memory here
  // (SP's activations; 0.5 ms only after some all-reduces), the counted one
  // 0.3-0.6 ms (the DP buckets' call).
  thread_local std::vector<int> counts;
  counts.assign(size_t(size_), int(n));
  return MPI_Reduce_scatter(in, out, counts.data(), mpi_type(type), mpi_op(op), comm_);
}

int MpiBackend::reduce_scatter_in_place(void* x, const ChunkSplit& split, ElemType type,
                                        ReduceOp op) {
  const int rc = MPI_Reduce_scatter(MPI_IN_PLACE, x, split.counts.data(), mpi_type(type),
                                    mpi_op(op), comm_);
  // MPI puts the in-place result at the start of the buffer.
  const size_t r = size_t(rank_), elem = elem_bytes(type);
  if (rc == MPI_SUCCESS && split.counts[r] > 0 && split.displs[r] > 0) {
    char* p = static_cast<char*>(x);
    std::memmove(p + size_t(split.displs[r]) * elem, p, size_t(split.counts[r]) * elem);
  }
  return rc;
}

int MpiBackend::start_reduce_scatter_in_place(void* x, const ChunkSplit& split, ElemType type,
                                              ReduceOp op, Request* req) {
  MPI_Request r;
  const int rc = MPI_Ireduce_scatter(MPI_IN_PLACE, x, split.counts.data(), mpi_type(type),
                                     mpi_op(op), comm_, &r);
  if (rc != MPI_SUCCESS) return rc;
  auto request = std::make_unique<MpiRequest>(r);
  const size_t i = size_t(rank_), elem = elem_bytes(type);
  char* p = static_cast<char*>(x);  // MPI's in-place result is at x[0]
  request->then_move(p + size_t(split.displs[i]) * elem, p, size_t(split.counts[i]) * elem);
  *req = std::move(request);
  return rc;
}

int MpiBackend::recv(void* x, int64_t n, ElemType type, int peer, int tag, int64_t* received) {
  MPI_Status status;
  const int rc = MPI_Recv(x, int(n), mpi_type(type), peer, tag, comm_, &status);
  int got = 0;
  if (rc == MPI_SUCCESS) MPI_Get_count(&status, mpi_type(type), &got);
  *received = got;
  return rc;
}

}  // namespace

std::unique_ptr<CommBackend> mpi_world_backend() {
  MT_CHECK(mpi_running(), "Communicator::world() needs MPI; fix: construct mt::MpiEnv first");
  MPI_Comm dup = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "Comm_dup", "world");
  return std::make_unique<MpiBackend>(dup);
}

std::string mpi_error_text(int rc) {
  char msg[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
    std::snprintf(msg, sizeof(msg), "code %d", rc);
  return msg;
}

void check_mpi(int rc, const char* op, const std::string& group) {
  if (rc != MPI_SUCCESS) fail_comm("MPI", op, group, mpi_error_text(rc));
}

}  // namespace mt
