#include "parallel/context_parallel_attention.h"

#include <algorithm>
#include <limits>

#include "backend/device.h"
#include "core/error.h"
#include "core/log.h"
#include "kernels/attention_ring.h"

namespace mt {

namespace {

// Tags of the ring's messages (one CP communicator; MPI keeps each pair's
// messages in order, so layers and micro-batches need no tag of their own).
constexpr int kTagK = 151, kTagDk = 153;

// Sizes of the ring; k and q have heads of d features, v and ctx of dv.
struct RingShape {
  int64_t c = 0;     // chunk length (tokens)
  int64_t d = 0, dv = 0;
  int64_t cs = 0;    // elements of one chunk of q or k: b·a·c·d
  int64_t csv = 0;   // elements of one chunk of v or ctx: b·a·c·dv
  int64_t rows = 0;  // query rows of one chunk: b·a·c
  int64_t g = 0;     // key/value heads (query groups)
  int64_t gs = 0;    // elements of one chunk of the groups' k: b·g·c·d
  int64_t gsv = 0;   // elements of one chunk of the groups' v: b·g·c·dv
  int64_t kvp() const { return 2 * (gs + gsv); }  // one rank's K | V groups, two chunks each
};

RingShape ring_shape(const AttentionDims& dims, int64_t groups, const ContextParallel& cp) {
  MT_CHECK(cp.size() > 1 && dims.s % 2 == 0, "context-parallel attention over ", dims.s,
           " rows at CP ", cp.size(), " (internal error: needs CP > 1 and two equal chunks)");
  MT_CHECK(groups >= 1 && dims.a % groups == 0, "context-parallel attention: ", dims.a,
           " heads in ", groups, " query groups (internal error)");
  RingShape r;
  r.c = dims.s / 2;
  r.d = dims.d;
  r.dv = attention_dv(dims);
  r.rows = dims.b * dims.a * r.c;
  r.cs = r.rows * r.d;
  r.csv = r.rows * r.dv;
  r.g = groups;
  r.gs = dims.b * groups * r.c * r.d;
  r.gsv = dims.b * groups * r.c * r.dv;
  return r;
}

// The attention of one chunk pair: queries of this rank's chunk qj over keys
// of chunk kj of CP rank `src`, both c long.
AttentionDims block_dims(const AttentionDims& dims, const ContextParallel& cp, int64_t c,
                         int64_t qj, int64_t src, int64_t kj) {
  AttentionDims bd;
  bd.b = dims.b;
  bd.a = dims.a;
  bd.s = c;
  bd.sk = c;
  bd.d = dims.d;
  bd.dv = dims.dv;
  bd.math = dims.math;
  bd.q_pos0 = cp_chunk_pos0(cp.size(), cp.rank(), c, qj);
  bd.k_pos0 = cp_chunk_pos0(cp.size(), src, c, kj);
  bd.s_global = dims.s_global;
  bd.window_left = dims.window_left;
  bd.doc_start = dims.doc_start;  // indexed by global positions: the same for every block
  return bd;
}

// True when every key of the block is after every query (the causal mask
// hides it) or, with a sliding window L, before every query's window (the
// last key < the first query - L): it is skipped (no computation, no
// contribution).
bool fully_masked(const AttentionDims& bd) {
  const bool after = bd.k_pos0 > bd.q_pos0 + bd.s - 1;
  const bool before = bd.window_left >= 0 && bd.k_pos0 + bd.sk - 1 < bd.q_pos0 - bd.window_left;
  return after || before;
}

// Scratch carved from the workspace: [attention kernel | ring buffers]. The
// travelling K|V are in the storage of q, k, v (fp32, or bf16 in bf16 runs:
// half the bytes on the wire); the dK|dV accumulators are always fp32 (sums
// over the ring's ranks keep their precision).
struct RingScratch {
  float* attn = nullptr;
  void* kv[2] = {nullptr, nullptr};  // travelling (K | V) groups of two chunks, kvp() each
  void* kv_heads = nullptr;          // (K | V) repeated per head, 2·cs + 2·csv
  float* blk_ctx = nullptr;          // (csv)
  float* blk_lse = nullptr;          // (rows)
  float* dsum = nullptr;             // (2·rows)
  float* blk_dq = nullptr;           // (cs)
  float* blk_dk = nullptr;           // (cs)
  float* blk_dv = nullptr;           // (csv)
  float* dkv_part[2] = {nullptr, nullptr};  // (dK | dV) travelling group sums, kvp() each
  float* dkv_in = nullptr;                  // (kvp())
};

int64_t kernel_floats(const AttentionDims& dims, int64_t c) {
  AttentionDims bd = dims;
  bd.s = c;
  bd.sk = c;
  bd.q_pos0 = 0;
  bd.k_pos0 = 0;
  return attention_workspace_floats(bd);
}

// Bytes of one stored q/k/v element: bf16 math reads bf16 storage.
int64_t kv_elem_bytes(const AttentionDims& dims) { return dims.math == MathMode::kBF16 ? 2 : 4; }

// Floats that n K/V elements take in the workspace.
int64_t kv_floats(const AttentionDims& dims, int64_t n) {
  return (n * kv_elem_bytes(dims) + 3) / 4;
}

RingScratch carve(float* ws, const AttentionDims& dims, const RingShape& r) {
  RingScratch s;
  float* p = ws;
  auto take = [&](int64_t n) {
    float* q = p;
    p += n;
    return q;
  };
  s.attn = take(kernel_floats(dims, r.c));
  s.kv[0] = take(kv_floats(dims, r.kvp()));
  s.kv[1] = take(kv_floats(dims, r.kvp()));
  s.kv_heads = take(kv_floats(dims, 2 * (r.cs + r.csv)));
  s.blk_ctx = take(r.csv);
  s.blk_lse = take(r.rows);
  s.dsum = take(2 * r.rows);
  s.blk_dq = take(r.cs);
  s.blk_dk = take(r.cs);
  s.blk_dv = take(r.csv);
  s.dkv_part[0] = take(r.kvp());
  s.dkv_part[1] = take(r.kvp());
  s.dkv_in = take(r.kvp());
  return s;
}

// q, k, v are stored as the math reads them: bf16 in bf16 math, else fp32.
void check_storage(const char* what, const AttentionDims& dims, ReadView q, ReadView k,
                   ReadView v) {
  const bool bf16 = dims.math == MathMode::kBF16;
  for (const ReadView& x : {q, k, v})
    MT_CHECK(bf16 ? x.bf16 != nullptr : x.f32 != nullptr, what, ": q/k/v storage does not match ",
             math_mode_name(dims.math), " math (internal error: the ring sends K/V as stored; "
             "pass bf16 storage in bf16 math, fp32 otherwise)");
}

// Waits for the handles, adding the time spent to the CP group's busy
// seconds: the communication the block computation did not hide.
template <class... H>
void wait_exposed(const Communicator& comm, H&... handles) {
  Timer timer;
  (handles.wait(), ...);
  comm.add_busy_seconds(timer.seconds());
}

}  // namespace

int64_t context_parallel_attention_workspace_floats(const AttentionDims& dims, int64_t groups) {
  const int64_t c = dims.s / 2, rows = dims.b * dims.a * c, dv = attention_dv(dims);
  const int64_t cs = rows * dims.d, csv = rows * dv;
  const int64_t kvp = 2 * dims.b * groups * c * (dims.d + dv);
  return kernel_floats(dims, c) + 2 * kv_floats(dims, kvp) + kv_floats(dims, 2 * (cs + csv)) +
         csv + rows + 2 * rows + 2 * cs + csv + 3 * kvp;
}

int64_t context_parallel_ring_bytes(const AttentionDims& dims, int64_t groups, int64_t cp_size,
                                    bool backward) {
  const int64_t kv = 2 * dims.b * groups * (dims.s / 2) * (dims.d + attention_dv(dims));  // K | V
  const int64_t kv_msgs = (cp_size - 1) * kv * kv_elem_bytes(dims);
  return backward ? kv_msgs + cp_size * kv * int64_t(sizeof(float)) : kv_msgs;
}

namespace {

// The K/V of this step: this rank's own (t = 0), or the received groups
// repeated per head. Starts the next step's transfer of the groups first.
// T: the storage of k and v (float, or uint16_t for bf16).
struct KvStep {
  ReadView k, v;
  CommHandle send, recv;
};

template <class T>
KvStep start_kv_step(int t, const T* k, const T* v, RingScratch& w, const RingShape& r,
                     const AttentionDims& dims, const ContextParallel& cp) {
  const Communicator& comm = *cp.cp;
  const int n = int(cp.size()), me = int(cp.rank());
  const int64_t kp = 2 * r.gs;  // one rank's K groups (two chunks); its V groups follow
  const int64_t batches = 2 * dims.b, cd = r.c * r.d, cdv = r.c * r.dv;
  T* const ring[2] = {static_cast<T*>(w.kv[0]), static_cast<T*>(w.kv[1])};
  T* const heads = static_cast<T*>(w.kv_heads);
  KvStep st;
  if (t == 0) {  // pack this rank's groups: what travels first
    pack_head_groups(ring[0], k, batches, dims.a, r.g, cd);
    pack_head_groups(ring[0] + kp, v, batches, dims.a, r.g, cdv);
  }
  // One message of K | V groups to the next rank, the next step's from the previous.
  if (t + 1 < n) {
    st.recv = comm.irecv(ring[(t + 1) % 2], r.kvp(), (me + n - 1) % n, kTagK);
    st.send = comm.isend(ring[t % 2], r.kvp(), (me + 1) % n, kTagK);
  }
  if (t == 0) {
    st.k = k;
    st.v = v;
  } else {
    unpack_head_groups(heads, ring[t % 2], batches, dims.a, r.g, cd);
    unpack_head_groups(heads + 2 * r.cs, ring[t % 2] + kp, batches, dims.a, r.g, cdv);
    st.k = heads;
    st.v = heads + 2 * r.cs;
  }
  return st;
}

KvStep start_kv_step(int t, ReadView k, ReadView v, RingScratch& w, const RingShape& r,
                     const AttentionDims& dims, const ContextParallel& cp) {
  return k.bf16 ? start_kv_step(t, k.bf16, v.bf16, w, r, dims, cp)
                : start_kv_step(t, k.f32, v.f32, w, r, dims, cp);
}

}  // namespace

void context_parallel_attention_forward(float* ctx, float* lse, ReadView q, ReadView k,
                                        ReadView v, const AttentionDims& dims, int64_t groups,
                                        const AttentionDropout& drop, const ContextParallel& cp,
                                        float* workspace) {
  check_storage("context_parallel_attention_forward", dims, q, k, v);
  const RingShape r = ring_shape(dims, groups, cp);
  RingScratch w = carve(workspace, dims, r);
  const int n = int(cp.size()), me = int(cp.rank());
  bool started[2] = {false, false};  // has query chunk j a result yet?
  for (int t = 0; t < n; ++t) {
    const int src = (me - t + n) % n;  // whose K/V this step holds
    // The next block travels while this one is computed.
    KvStep kv = start_kv_step(t, k, v, w, r, dims, cp);
    for (int64_t qj = 0; qj < 2; ++qj)
      for (int64_t kj = 0; kj < 2; ++kj) {
        const AttentionDims bd = block_dims(dims, cp, r.c, qj, src, kj);
        if (fully_masked(bd)) continue;
        float* ctx_j = ctx + qj * r.csv;
        float* lse_j = lse + qj * r.rows;
        const ReadView qv = q.at(qj * r.cs);
        const ReadView kb = kv.k.at(kj * r.cs), vb = kv.v.at(kj * r.csv);
        if (!started[qj]) {  // the first block of these rows writes directly
          attention_forward(ctx_j, lse_j, qv, kb, vb, bd, drop, w.attn);
          started[qj] = true;
        } else {
          attention_forward(w.blk_ctx, w.blk_lse, qv, kb, vb, bd, drop, w.attn);
          attention_merge(ctx_j, lse_j, w.blk_ctx, w.blk_lse, r.rows, r.dv);
        }
      }
    wait_exposed(*cp.cp, kv.recv, kv.send);
  }
  // Every query sees at least its own position (the diagonal block), so each
  // chunk has a result; guard the invariant anyway.
  MT_CHECK(started[0] && started[1], "context-parallel attention: a query chunk saw no key ",
           "block (internal error)");
}

void context_parallel_attention_backward(float* dq, float* dk, float* dv, const float* dctx,
                                         ReadView q, ReadView k, ReadView v, ReadView ctx_sbh,
                                         const float* lse, const AttentionDims& dims,
                                         int64_t groups, const AttentionDropout& drop,
                                         const ContextParallel& cp, float* workspace) {
  check_storage("context_parallel_attention_backward", dims, q, k, v);
  MT_CHECK(ctx_sbh, "context_parallel_attention_backward: null ctx_sbh (internal error)");
  const RingShape r = ring_shape(dims, groups, cp);
  RingScratch w = carve(workspace, dims, r);
  const Communicator& comm = *cp.cp;
  const int n = int(cp.size()), me = int(cp.rank());
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  const int64_t kvp = r.kvp(), kp = 2 * r.gs, batches = 2 * dims.b;
  const int64_t cd = r.c * r.d, cdv = r.c * r.dv;
  // D = rowsum(dctx · ctx) of the merged rows, for every block's softmax backward.
  ring_row_dsum(w.dsum, dctx, ctx_sbh, dims);
  fill_zero(dq, size_t(2 * r.cs) * sizeof(float));
  CommHandle sdkv;  // the accumulator sent last step (its buffer is reused next-but-one)
  for (int t = 0; t < n; ++t) {
    const int src = (me - t + n) % n;
    KvStep kv = start_kv_step(t, k, v, w, r, dims, cp);
    CommHandle rdkv;
    if (t > 0)  // src's dK | dV group sums, from the ranks that held this block before
      rdkv = comm.irecv(w.dkv_in, kvp, prev, kTagDk);
    float* part = w.dkv_part[t % 2];  // this rank's dK | dV of src's chunks' groups
    fill_zero(part, size_t(kvp) * sizeof(float));
    for (int64_t qj = 0; qj < 2; ++qj)
      for (int64_t kj = 0; kj < 2; ++kj) {
        const AttentionDims bd = block_dims(dims, cp, r.c, qj, src, kj);
        if (fully_masked(bd)) continue;
        attention_backward(w.blk_dq, w.blk_dk, w.blk_dv, dctx + qj * r.csv, q.at(qj * r.cs),
                           kv.k.at(kj * r.cs), kv.v.at(kj * r.csv), nullptr, lse + qj * r.rows,
                           bd, drop, w.attn, w.dsum + qj * r.rows);
        add_inplace(dq + qj * r.cs, w.blk_dq, r.cs);
        add_head_group_sums(part + kj * r.gs, w.blk_dk, dims.b, dims.a, r.g, cd);
        add_head_group_sums(part + kp + kj * r.gsv, w.blk_dv, dims.b, dims.a, r.g, cdv);
      }
    if (t > 0) {
      wait_exposed(comm, rdkv);
      add_inplace(part, w.dkv_in, kvp);
    }
    wait_exposed(comm, sdkv);  // last step's accumulator left (before this one's send is posted)
    sdkv = comm.isend(part, kvp, next, kTagDk);
    wait_exposed(comm, kv.recv, kv.send);
  }
  // The accumulator of this rank's own chunks has been round the ring.
  CommHandle rdkv = comm.irecv(w.dkv_in, kvp, prev, kTagDk);
  wait_exposed(comm, rdkv, sdkv);
  head_groups_to_first_heads(dk, w.dkv_in, batches, dims.a, r.g, cd);
  head_groups_to_first_heads(dv, w.dkv_in + kp, batches, dims.a, r.g, cdv);
}

}  // namespace mt
