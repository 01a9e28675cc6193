// CommBackend: the transport seam under Communicator (communicator.h), as
// backend/ is the device seam under the kernels. A backend moves typed
// buffers among the ranks of one group and says why a call failed; it knows
// nothing of group names, the watchdog, busy time or argument checks, which
// Communicator keeps for every backend.
//
// Implementations: MpiBackend (mpi_backend.h, the only one today; every
// <mpi.h> use of the collectives is there). An NCCL backend goes beside it
// (comm/nccl_backend.{h,cc}, with its CUDA stream from backend/cuda): device
// pointers in, ncclComm_t split from the world's, requests that wait on a CUDA
// event. tests/comm/comm_backend_test.cc slots a second, in-process backend in.
//
// Contract for every call:
// - Returns 0 on success, or a failure code that error_text() explains; the
//   caller (Communicator) throws. Non-blocking calls hand their request out
//   through `req` (left empty on failure).
// - Counts n are elements of `type`, in [0, INT_MAX]; the caller checks them
//   and splits larger buffers. Splits come from chunk_split() and have one
//   chunk per rank (the caller checks).
// - A group of one rank never reaches the data collectives (Communicator
//   returns or copies first); split and point-to-point to oneself do.
// - Peers and roots are ranks of this group.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mt {

// Element types on the wire. kU16 carries bf16 values (kernels/precision.h).
enum class ElemType { kF32, kF64, kI64, kI32, kU16, kU8 };
// kBf16Sum: on kU16 only; each pairwise sum in fp32, rounded once to bf16
// (comm/bf16_sum.h).
enum class ReduceOp { kSum, kMax, kBf16Sum };

size_t elem_bytes(ElemType type);

// How a buffer is cut into one contiguous chunk per rank of a group, in rank
// order: chunk i is [displs[i], displs[i] + counts[i]) (counts may be 0), for
// the in-place v-collectives. Build it with chunk_split().
struct ChunkSplit {
  std::vector<int> counts, displs;
  int64_t total() const { return counts.empty() ? 0 : int64_t(displs.back()) + counts.back(); }
};

// Contiguous chunks of the given sizes (each in [0, INT_MAX], total too).
ChunkSplit chunk_split(const std::vector<int64_t>& counts);

// One non-blocking operation in flight. Buffers must stay valid until it
// completes; CommHandle (communicator.h) waits before it is destroyed.
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  // Blocks until the operation completes: 0, or a failure code.
  virtual int wait() = 0;
  // *done = whether it has completed (a later wait() then returns at once).
  virtual int test(bool* done) = 0;
  // The backend's words for a failure code of this request.
  virtual std::string error_text(int code) const = 0;
};

class CommBackend {
 public:
  virtual ~CommBackend() = default;

  // "MPI", "NCCL": the first word of a failure's message.
  virtual const char* kind() const = 0;
  virtual std::string error_text(int code) const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // World rank of each rank of this group, in group order (for messages).
  virtual std::vector<int> world_ranks() const = 0;
  virtual int max_tag() const = 0;  // largest valid point-to-point tag
  // Collective: the group's ranks with the same color >= 0 form a new group,
  // ranked by key; *out is left empty on ranks with color < 0.
  virtual int split(int color, int key, std::unique_ptr<CommBackend>* out) = 0;
  // The name of this rank's host (not collective).
  virtual std::string processor_name() const = 0;

  // Blocking collectives. In place: x[i] = op over the group of x[i]. x: (n)
  virtual int all_reduce(void* x, int64_t n, ElemType type, ReduceOp op) = 0;
  // out: (size * n) = concat over ranks of in: (n). in may be out's chunk
  // `rank` (in place); otherwise they do not overlap.
  virtual int all_gather(void* out, const void* in, int64_t n, ElemType type) = 0;
  // out: (n) = chunk `rank` of the op over ranks of in: (size * n).
  virtual int reduce_scatter(void* out, const void* in, int64_t n, ElemType type,
                             ReduceOp op) = 0;
  // In place over x: (split.total()): chunk `rank` of x = the op over the
  // group of that chunk; the other chunks are scratch afterwards.
  virtual int reduce_scatter_in_place(void* x, const ChunkSplit& split, ElemType type,
                                      ReduceOp op) = 0;
  // In place over x: chunk i of x = chunk i of rank i.
  virtual int all_gather_in_place(void* x, const ChunkSplit& split, ElemType type) = 0;
  // Chunk j of in goes to rank j; chunk i of out is what rank i sent here.
  virtual int all_to_all_v(void* out, const ChunkSplit& recv_split, const void* in,
                           const ChunkSplit& send_split, ElemType type) = 0;
  virtual int broadcast(void* data, int64_t n, ElemType type, int root) = 0;
  virtual int barrier() = 0;
  virtual int send(const void* x, int64_t n, ElemType type, int peer, int tag) = 0;
  // *received: the element count of the message that arrived.
  virtual int recv(void* x, int64_t n, ElemType type, int peer, int tag,
                   int64_t* received) = 0;

  // Non-blocking forms of the above (same results once the request completes).
  using Request = std::unique_ptr<CommRequest>;
  virtual int start_all_reduce(void* x, int64_t n, ElemType type, ReduceOp op, Request* req) = 0;
  virtual int start_all_gather(void* out, const void* in, int64_t n, ElemType type,
                               Request* req) = 0;
  virtual int start_reduce_scatter(void* out, const void* in, int64_t n, ElemType type,
                                   ReduceOp op, Request* req) = 0;
  // `split` must outlive the request.
  virtual int start_reduce_scatter_in_place(void* x, const ChunkSplit& split, ElemType type,
                                            ReduceOp op, Request* req) = 0;
  virtual int start_all_gather_in_place(void* x, const ChunkSplit& split, ElemType type,
                                        Request* req) = 0;
  virtual int isend(const void* x, int64_t n, ElemType type, int peer, int tag, Request* req) = 0;
  virtual int irecv(void* x, int64_t n, ElemType type, int peer, int tag, Request* req) = 0;
};

// Throws mt::Error "<kind> <op> on group '<group>' failed: <reason>; fix: ...".
[[noreturn]] void fail_comm(const char* kind, const char* op, const std::string& group,
                            const std::string& reason);

}  // namespace mt
