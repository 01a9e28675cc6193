// Communicator: one MPI communicator for one process group (tp, dp, pp, mp,
// embd, world), with a name for error messages. Every collective of the
// training code is a named call on one of these (DESIGN.md principle 4).
//
// - Every MPI call is checked: the communicators use MPI_ERRORS_RETURN, and a
//   failure throws mt::Error naming the operation, the group and MPI's own
//   error string. (The CLI turns that into abort_job(), see mpi_env.h.)
// - A group of size 1 short-circuits: reductions and broadcasts return at
//   once, gathers / scatters become a copy; no MPI call is made.
// - A rank that is not a member of a group (e.g. a middle pipeline stage and
//   the embedding group) holds a null Communicator: size() == 0, and any
//   operation on it throws.
// - Every blocking call, and the wait of a non-blocking handle, runs in a
//   WaitScope (dist/watchdog.h): --distributed-timeout-minutes ends the job
//   when one lasts too long, naming the operation and the group's members.
// - Results: all_reduce_* are in place (`=`, the reduced value replaces the
//   input); gathers and scatters write their output (`=`).
#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/watchdog.h"

namespace mt {

// How a buffer is cut into one contiguous chunk per rank of a group, in rank
// order: chunk i is [displs[i], displs[i] + counts[i]) (counts may be 0), for
// the in-place v-collectives below. Build it with chunk_split().
struct ChunkSplit {
  std::vector<int> counts, displs;
  int64_t total() const { return counts.empty() ? 0 : int64_t(displs.back()) + counts.back(); }
};
// Reductions are issued in pieces of at most this many bytes: over Open MPI's
// shared memory one 38.6M-float all-reduce takes ~400 ms on these machines,
// the same floats in 4 MB pieces ~26 ms (bench/README.md, "Collectives").
// The blocking calls below split by themselves; the non-blocking ones are
// single calls (splitting them did not help: without a progress thread Open
// MPI advances them only inside MPI calls, which dominates).
inline constexpr int64_t kReduceChunkBytes = int64_t(4) << 20;

// Contiguous chunks of the given sizes (each in [0, INT_MAX], total too).
ChunkSplit chunk_split(const std::vector<int64_t>& counts);

// Handle of a non-blocking operation (start_* / isend / irecv). wait()
// completes it (and throws on error); the destructor waits too, so the
// buffers must outlive the handle. Move-only; a default handle is complete.
class CommHandle {
 public:
  CommHandle() = default;
  // `peer`: the world rank of a point-to-point peer, else -1.
  CommHandle(MPI_Request req, const char* op, std::shared_ptr<const GroupId> group, int peer = -1)
      : req_(req), op_(op), group_(std::move(group)), peer_(peer) {}
  ~CommHandle();
  CommHandle(CommHandle&& o) noexcept;
  CommHandle& operator=(CommHandle&& o) noexcept;
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;

  void wait();
  // True once the operation has finished (then wait() returns at once).
  bool test();
  bool pending() const { return req_ != MPI_REQUEST_NULL; }
  // On completion (in wait() or a successful test()), also memmove n floats
  // from src to dst: for results MPI leaves elsewhere than the caller wants
  // them (the in-place reduce-scatter).
  CommHandle& then_move(float* dst, const float* src, int64_t n);
  // The same for n elements of `elem` bytes (the bf16 reduce-scatter).
  CommHandle& then_move_bytes(void* dst, const void* src, int64_t n, size_t elem);

 private:
  void complete();  // runs the pending move, if any

  MPI_Request req_ = MPI_REQUEST_NULL;
  char* move_dst_ = nullptr;
  const char* move_src_ = nullptr;
  size_t move_bytes_ = 0;
  const char* op_ = "";
  std::shared_ptr<const GroupId> group_;  // the Communicator's, for messages
  int peer_ = -1;
};

class Communicator {
 public:
  // A null group (this rank is not a member): size() == 0.
  Communicator() = default;
  // Wraps `comm` (MPI_COMM_NULL gives a null group). With owns == true the
  // communicator is freed on destruction (if MPI is still running). Sets
  // MPI_ERRORS_RETURN on it.
  Communicator(MPI_Comm comm, std::string name, bool owns);
  // A duplicate of MPI_COMM_WORLD named "world" (MPI must be initialised).
  static Communicator world();

  ~Communicator();
  Communicator(Communicator&& o) noexcept;
  Communicator& operator=(Communicator&& o) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  const std::string& name() const { return name_; }
  // Name and members (world ranks), for messages.
  const GroupId& id() const { return *id_; }
  // World rank of rank `r` of this group.
  int world_rank_of(int r) const { return world_ranks_.at(size_t(r)); }
  int rank() const { return rank_; }  // -1 in a null group
  int size() const { return size_; }  // 0 in a null group
  bool is_member() const { return size_ > 0; }
  MPI_Comm comm() const { return comm_; }

  // In place: x[i] = sum (or max) over the group of x[i]. x: (n)
  void all_reduce_sum(float* x, int64_t n) const;
  void all_reduce_sum(double* x, int64_t n) const;
  void all_reduce_sum(int64_t* x, int64_t n) const;
  void all_reduce_max(float* x, int64_t n) const;
  void all_reduce_max(double* x, int64_t n) const;
  void all_reduce_max(int* x, int64_t n) const;

  // out = concat over ranks of in. in: (n), out: (size * n); `in` may be the
  // rank's own chunk of `out` (in == out + rank * n), otherwise no overlap.
  void all_gather(float* out, const float* in, int64_t n) const;
  void all_gather(uint16_t* out, const uint16_t* in, int64_t n) const;  // bf16 activations
  // out = chunk `rank` of the sum over ranks of in. in: (size * n), out: (n);
  // in and out must not overlap.
  void reduce_scatter_sum(float* out, const float* in, int64_t n) const;
  // In place over x: (split.total()), the chunks of `split` (one per rank):
  // afterwards chunk `rank` of x = the sum over the group of that chunk (`=`);
  // the other chunks of x are scratch (undefined). MPI_Reduce_scatter, or
  // above 4 MB a chunked all-reduce (faster for large buffers over Open MPI's
  // shared memory; the other chunks then hold the sum too).
  void reduce_scatter_sum_in_place(float* x, const ChunkSplit& split) const;
  // In place over x: (split.total()): chunk i of x = chunk i of rank i (`=`);
  // this rank's chunk is its input. MPI_Allgatherv.
  void all_gather_in_place(float* x, const ChunkSplit& split) const;
  void all_gather_in_place(uint16_t* x, const ChunkSplit& split) const;  // bf16 weights
  // bf16 reductions (--grad-reduce-in-bf16): as all_reduce_sum and
  // reduce_scatter_sum_in_place, on bf16 values (uint16_t storage, see
  // kernels/precision.h) summed by bf16_sum_op() (dist/bf16_sum.h: each
  // pairwise sum in fp32, rounded once to bf16). Half the bytes of fp32.
  void all_reduce_sum_bf16(uint16_t* x, int64_t n) const;
  void reduce_scatter_sum_bf16_in_place(uint16_t* x, const ChunkSplit& split) const;
  // All-to-all with per-peer counts (MPI_Alltoallv; an expert dispatcher's
  // exchange): chunk j of `in` (send_split) goes to rank j, and chunk i of
  // `out` (recv_split) is what rank i sent here (`=`). send_split.counts[j] on
  // this rank must equal recv_split.counts[i] on rank j (the caller exchanges
  // the counts first, e.g. with all_to_all_counts). in and out must not overlap.
  void all_to_all_v(float* out, const ChunkSplit& recv_split, const float* in,
                    const ChunkSplit& send_split) const;
  void all_to_all_v(uint16_t* out, const ChunkSplit& recv_split, const uint16_t* in,
                    const ChunkSplit& send_split) const;  // bf16 activations
  // recv[i] = send[rank] of rank i: the counts each peer will send here.
  // send, recv: (size).
  std::vector<int64_t> all_to_all_counts(const std::vector<int64_t>& send) const;
  // The `bytes` bytes at data on `root` are copied to every rank.
  void broadcast(void* data, size_t bytes, int root) const;
  void barrier() const;

  // Point-to-point within the group; `peer` is a rank in this group.
  void send(const float* x, int64_t n, int peer, int tag) const;  // x: (n)
  void recv(float* x, int64_t n, int peer, int tag) const;        // x: (n), `=`
  void send(const uint16_t* x, int64_t n, int peer, int tag) const;  // bf16 activations
  void recv(uint16_t* x, int64_t n, int peer, int tag) const;

  // Non-blocking variants; buffers must stay valid until the handle completes.
  CommHandle start_all_reduce_sum(float* x, int64_t n) const;
  CommHandle start_all_gather(float* out, const float* in, int64_t n) const;
  CommHandle start_reduce_scatter_sum(float* out, const float* in, int64_t n) const;
  // As the blocking in-place versions; `split` must outlive the handle.
  CommHandle start_reduce_scatter_sum_in_place(float* x, const ChunkSplit& split) const;
  CommHandle start_all_gather_in_place(float* x, const ChunkSplit& split) const;
  CommHandle start_all_gather_in_place(uint16_t* x, const ChunkSplit& split) const;
  CommHandle start_all_reduce_sum_bf16(uint16_t* x, int64_t n) const;
  CommHandle start_reduce_scatter_sum_bf16_in_place(uint16_t* x, const ChunkSplit& split) const;
  CommHandle isend(const float* x, int64_t n, int peer, int tag) const;
  CommHandle isend(const uint16_t* x, int64_t n, int peer, int tag) const;
  CommHandle irecv(float* x, int64_t n, int peer, int tag) const;
  CommHandle irecv(uint16_t* x, int64_t n, int peer, int tag) const;  // bf16 activations

 public:
  // Wall time spent inside this group's blocking collectives and send/recv
  // since the last reset (non-blocking work is timed by whoever waits on it).
  double busy_seconds() const { return busy_seconds_; }
  void reset_busy_seconds() const { busy_seconds_ = 0; }
  // Time a caller spent waiting on this group's non-blocking operations
  // (what the overlap did not hide), counted with the blocking calls.
  void add_busy_seconds(double s) const { busy_seconds_ += s; }
  // Bytes this rank has sent point-to-point (send, isend) in this group since
  // the last reset: the context-parallel ring's traffic on the CP group.
  int64_t sent_bytes() const { return sent_bytes_; }
  void reset_sent_bytes() const { sent_bytes_ = 0; }

 private:
  void check_member(const char* op) const;
  int count(const char* op, int64_t n) const;  // n as an MPI count, checked
  int64_t type_bytes(MPI_Datatype type) const;
  void check_peer(const char* op, int peer, int tag) const;
  void check_split(const char* op, const ChunkSplit& split) const;
  void all_reduce(void* x, int64_t n, MPI_Datatype type, MPI_Op op, const char* what) const;
  void all_gather_in_place(void* x, const ChunkSplit& split, MPI_Datatype type) const;
  // In-place reduce-scatter of elements of `elem` bytes (MPI_FLOAT + MPI_SUM,
  // or MPI_UINT16_T + the bf16 sum); the blocking and the non-blocking form.
  void reduce_scatter_in_place(void* x, const ChunkSplit& split, MPI_Datatype type, MPI_Op op,
                               size_t elem, const char* what) const;
  CommHandle start_reduce_scatter_in_place(void* x, const ChunkSplit& split, MPI_Datatype type,
                                           MPI_Op op, size_t elem, const char* what) const;
  CommHandle start_all_reduce(void* x, int64_t n, MPI_Datatype type, MPI_Op op,
                              const char* what) const;
  void all_gather(void* out, const void* in, int64_t n, MPI_Datatype type, size_t elem) const;
  void all_to_all_v(void* out, const ChunkSplit& recv_split, const void* in,
                    const ChunkSplit& send_split, MPI_Datatype type, size_t elem) const;
  void send(const void* x, int64_t n, MPI_Datatype type, int peer, int tag) const;
  void recv(void* x, int64_t n, MPI_Datatype type, int peer, int tag) const;
  CommHandle isend(const void* x, int64_t n, MPI_Datatype type, int peer, int tag) const;
  CommHandle irecv(void* x, int64_t n, MPI_Datatype type, int peer, int tag) const;
  CommHandle start_all_gather_in_place(void* x, const ChunkSplit& split, MPI_Datatype type) const;
  void all_reduce_chunked(void* x, int64_t n, MPI_Datatype type, MPI_Op op,
                          const char* what) const;  // all_reduce without the busy timer

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::shared_ptr<const GroupId> id_ = std::make_shared<const GroupId>(GroupId{"null", ""});
  std::vector<int> world_ranks_;  // of this group's ranks, in group order
  mutable double busy_seconds_ = 0;  // wall time inside blocking MPI calls
  mutable int64_t sent_bytes_ = 0;   // point-to-point bytes sent
  std::string name_ = "null";
  int rank_ = -1;
  int size_ = 0;
  int tag_ub_ = 32767;  // largest valid tag (MPI_TAG_UB), at least 32767
  bool owns_ = false;
};

// Throws mt::Error "<op> on group '<group>' failed: <MPI error string>" unless
// rc == MPI_SUCCESS. For code that makes its own MPI calls.
void check_mpi(int rc, const char* op, const std::string& group);

}  // namespace mt
