// Communicator: one process group (tp, dp, pp, mp, embd, world), with a name
// for error messages. Every collective of the training code is a named call
// on one of these (DESIGN.md principle 4). The transport is its CommBackend
// (comm_backend.h): MPI today (mpi_backend.h), NCCL beside it for a device.
//
// - Every backend call is checked: a failure throws mt::Error naming the
//   backend, the operation, the group and the backend's own error string.
//   (The CLI turns that into abort_job(), see mpi_env.h.)
// - A group of size 1 short-circuits: reductions and broadcasts return at
//   once, gathers / scatters become a copy; the backend is not called.
// - A rank that is not a member of a group (e.g. a middle pipeline stage and
//   the embedding group) holds a null Communicator: size() == 0, and any
//   operation on it throws.
// - Every blocking call, and the wait of a non-blocking handle, runs in a
//   WaitScope (comm/watchdog.h): --distributed-timeout-minutes ends the job
//   when one lasts too long, naming the operation and the group's members.
// - Results: all_reduce_* are in place (`=`, the reduced value replaces the
//   input); gathers and scatters write their output (`=`).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/comm_backend.h"
#include "comm/comm_handle.h"
#include "comm/watchdog.h"
#include "core/timeline.h"

namespace mt {

// ChunkSplit and chunk_split() (comm_backend.h) cut a buffer into one chunk
// per rank for the in-place v-collectives below.
// Reductions are issued in pieces of at most this many bytes: over Open MPI's
// shared memory one 38.6M-float all-reduce takes ~400 ms on these machines,
// the same floats in 4 MB pieces ~26 ms (bench/README.md, "Collectives").
// The blocking calls below split by themselves; the non-blocking ones are
// single calls (splitting them did not help: without a progress thread Open
// MPI advances them only inside MPI calls, which dominates).
inline constexpr int64_t kReduceChunkBytes = int64_t(4) << 20;

class Communicator {
 public:
  // A null group (this rank is not a member): size() == 0.
  Communicator() = default;
  // The group of `backend` (null: a null group), named `name`.
  Communicator(std::unique_ptr<CommBackend> backend, std::string name);
  // A duplicate of MPI_COMM_WORLD named "world" (MPI must be initialised).
  static Communicator world();
  // Collective over this group: the ranks with the same color >= 0 form a
  // group named `name`, ranked by key (then by rank here); a rank with
  // color < 0 gets a null group.
  Communicator split(int color, int key, std::string name) const;
  // Collective: the host name of every rank of the group, in rank order
  // (at most kMaxProcessorName - 1 characters each).
  std::vector<std::string> processor_names() const;
  static constexpr int kMaxProcessorName = 256;

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
  // the other chunks of x are scratch (undefined). the backend's reduce-scatter, or
  // above 4 MB a chunked all-reduce (faster for large buffers over Open MPI's
  // shared memory; the other chunks then hold the sum too).
  void reduce_scatter_sum_in_place(float* x, const ChunkSplit& split) const;
  // In place over x: (split.total()): chunk i of x = chunk i of rank i (`=`);
  // this rank's chunk is its input.
  void all_gather_in_place(float* x, const ChunkSplit& split) const;
  void all_gather_in_place(uint16_t* x, const ChunkSplit& split) const;  // bf16 weights
  // bf16 reductions (--grad-reduce-in-bf16): as all_reduce_sum and
  // reduce_scatter_sum_in_place, on bf16 values (uint16_t storage, see
  // kernels/precision.h) summed by ReduceOp::kBf16Sum (comm/bf16_sum.h: each
  // pairwise sum in fp32, rounded once to bf16). Half the bytes of fp32.
  void all_reduce_sum_bf16(uint16_t* x, int64_t n) const;
  void reduce_scatter_sum_bf16_in_place(uint16_t* x, const ChunkSplit& split) const;
  // All-to-all with per-peer counts (MPI_Alltoallv's; an expert dispatcher's
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
  // Collective: rank `root` gets every rank's `bytes` bytes at `data` (sizes
  // may differ per rank), in rank order; the other ranks get an empty list.
  std::vector<std::vector<char>> gather_bytes(const void* data, size_t bytes, int root) const;

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
  // The recorder (core/timeline.h) every call of this group adds a span to
  // while it records (its group name and bytes in the span's args); null: none.
  // Code that holds a Communicator records its own spans there too.
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }
  Timeline* timeline() const { return timeline_; }

 private:
  void check_member(const char* op) const;
  int64_t count(const char* op, int64_t n) const;  // n, checked to fit a backend count
  void check_peer(const char* op, int peer, int tag) const;
  void check_split(const char* op, const ChunkSplit& split) const;
  // Throws (naming the backend, `op` and the group) unless rc == 0.
  void check(int rc, const char* op) const;
  // The handle of a started operation (or throws when rc != 0).
  // `bytes`: what it moves, for the timeline's wait span.
  CommHandle handle(int rc, CommBackend::Request req, const char* op, int peer = -1,
                    int64_t bytes = -1) const;
  void all_reduce(void* x, int64_t n, ElemType type, ReduceOp op, const char* what) const;
  void all_reduce_chunked(void* x, int64_t n, ElemType type, ReduceOp op,
                          const char* what) const;  // all_reduce without the busy timer
  void all_gather(void* out, const void* in, int64_t n, ElemType type) const;
  void all_gather_in_place(void* x, const ChunkSplit& split, ElemType type) const;
  // In-place reduce-scatter (f32 sum or bf16 sum); blocking and non-blocking.
  void reduce_scatter_in_place(void* x, const ChunkSplit& split, ElemType type, ReduceOp op,
                               const char* what) const;
  CommHandle start_reduce_scatter_in_place(void* x, const ChunkSplit& split, ElemType type,
                                           ReduceOp op, const char* what) const;
  CommHandle start_all_reduce(void* x, int64_t n, ElemType type, ReduceOp op,
                              const char* what) const;
  CommHandle start_all_gather_in_place(void* x, const ChunkSplit& split, ElemType type) const;
  void all_to_all_v(void* out, const ChunkSplit& recv_split, const void* in,
                    const ChunkSplit& send_split, ElemType type) const;
  void send(const void* x, int64_t n, ElemType type, int peer, int tag) const;
  void recv(void* x, int64_t n, ElemType type, int peer, int tag) const;
  CommHandle isend(const void* x, int64_t n, ElemType type, int peer, int tag) const;
  CommHandle irecv(void* x, int64_t n, ElemType type, int peer, int tag) const;

  std::unique_ptr<CommBackend> backend_;  // null in a null group
  std::shared_ptr<const GroupId> id_ = std::make_shared<const GroupId>(GroupId{"null", ""});
  std::vector<int> world_ranks_;  // of this group's ranks, in group order
  mutable double busy_seconds_ = 0;  // wall time inside blocking backend calls
  mutable int64_t sent_bytes_ = 0;   // point-to-point bytes sent
  Timeline* timeline_ = nullptr;     // not owned; null: nothing recorded
  std::string name_ = "null";
  int rank_ = -1;
  int size_ = 0;
  int max_tag_ = 32767;  // largest valid tag (the backend's)
};

}  // namespace mt
