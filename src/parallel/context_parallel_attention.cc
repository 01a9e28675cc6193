#include "parallel/context_parallel_attention.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace mt {

namespace {

// Tags of the ring's messages (one CP communicator; MPI keeps each pair's
// messages in order, so layers and micro-batches need no tag of their own).
constexpr int kTagK = 151, kTagV = 152, kTagDk = 153, kTagDv = 154;

struct RingShape {
  int64_t c = 0;     // chunk length (tokens)
  int64_t cs = 0;    // elements of one chunk of q, k, v: b·a·c·d
  int64_t rows = 0;  // query rows of one chunk: b·a·c
};

RingShape ring_shape(const AttentionDims& dims, const ContextParallel& cp) {
  MT_CHECK(cp.size() > 1 && dims.s % 2 == 0, "context-parallel attention over ", dims.s,
           " rows at CP ", cp.size(), " (internal error: needs CP > 1 and two equal chunks)");
  RingShape r;
  r.c = dims.s / 2;
  r.rows = dims.b * dims.a * r.c;
  r.cs = r.rows * dims.d;
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
  bd.math = dims.math;
  bd.q_pos0 = cp_chunk_pos0(cp.size(), cp.rank(), c, qj);
  bd.k_pos0 = cp_chunk_pos0(cp.size(), src, c, kj);
  bd.s_global = dims.s_global;
  return bd;
}

// True when every key of the block is after every query: the causal mask
// hides it, so it is skipped (no computation, no contribution).
bool fully_masked(const AttentionDims& bd) { return bd.k_pos0 > bd.q_pos0 + bd.s - 1; }

// Scratch carved from the workspace: [attention kernel | ring buffers].
struct RingScratch {
  float* attn = nullptr;
  float* kv[2] = {nullptr, nullptr};        // (K | V) of one rank's two chunks, 4·cs each
  float* blk_ctx = nullptr;                 // (cs)
  float* blk_lse = nullptr;                 // (rows)
  float* dsum = nullptr;                    // (2·rows)
  float* blk_dq = nullptr;                  // (cs)
  float* blk_dk = nullptr;                  // (cs)
  float* blk_dv = nullptr;                  // (cs)
  float* dkv_part[2] = {nullptr, nullptr};  // (dK | dV) travelling accumulators, 4·cs each
  float* dkv_in = nullptr;                  // (4·cs)
};

int64_t kernel_floats(const AttentionDims& dims, int64_t c) {
  AttentionDims bd = dims;
  bd.s = c;
  bd.sk = c;
  bd.q_pos0 = 0;
  bd.k_pos0 = 0;
  return attention_workspace_floats(bd);
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
  s.kv[0] = take(4 * r.cs);
  s.kv[1] = take(4 * r.cs);
  s.blk_ctx = take(r.cs);
  s.blk_lse = take(r.rows);
  s.dsum = take(2 * r.rows);
  s.blk_dq = take(r.cs);
  s.blk_dk = take(r.cs);
  s.blk_dv = take(r.cs);
  s.dkv_part[0] = take(4 * r.cs);
  s.dkv_part[1] = take(4 * r.cs);
  s.dkv_in = take(4 * r.cs);
  return s;
}

void check_fp32(const char* what, ReadView q, ReadView k, ReadView v) {
  MT_CHECK(q.f32 && k.f32 && v.f32, what, ": bf16 q/k/v storage is not supported with "
           "context parallelism yet; fix: drop --bf16 or use --context-parallel-size 1");
}

void add(float* dst, const float* src, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

}  // namespace

int64_t context_parallel_attention_workspace_floats(const AttentionDims& dims) {
  const int64_t c = dims.s / 2, cs = dims.b * dims.a * c * dims.d, rows = dims.b * dims.a * c;
  return kernel_floats(dims, c) + 8 * cs + cs + rows + 2 * rows + 3 * cs + 12 * cs;
}

void context_parallel_attention_forward(float* ctx, float* lse, ReadView q, ReadView k,
                                        ReadView v, const AttentionDims& dims,
                                        const AttentionDropout& drop, const ContextParallel& cp,
                                        float* workspace) {
  check_fp32("context_parallel_attention_forward", q, k, v);
  const RingShape r = ring_shape(dims, cp);
  RingScratch w = carve(workspace, dims, r);
  const Communicator& comm = *cp.cp;
  const int n = int(cp.size()), me = int(cp.rank());
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  const int64_t kv_n = 2 * r.cs;  // one rank's K (or V): two chunks
  bool started[2] = {false, false};  // has query chunk j a result yet?
  for (int t = 0; t < n; ++t) {
    const int src = (me - t + n) % n;  // whose K/V this step holds
    const float* kc = t == 0 ? k.f32 : w.kv[t % 2];
    const float* vc = t == 0 ? v.f32 : w.kv[t % 2] + kv_n;
    // The next block travels while this one is computed.
    CommHandle sk, sv, rk, rv;
    if (t + 1 < n) {
      float* dst = w.kv[(t + 1) % 2];
      rk = comm.irecv(dst, kv_n, prev, kTagK);
      rv = comm.irecv(dst + kv_n, kv_n, prev, kTagV);
      sk = comm.isend(kc, kv_n, next, kTagK);
      sv = comm.isend(vc, kv_n, next, kTagV);
    }
    for (int64_t qj = 0; qj < 2; ++qj)
      for (int64_t kj = 0; kj < 2; ++kj) {
        const AttentionDims bd = block_dims(dims, cp, r.c, qj, src, kj);
        if (fully_masked(bd)) continue;
        float* ctx_j = ctx + qj * r.cs;
        float* lse_j = lse + qj * r.rows;
        const ReadView qv = q.f32 + qj * r.cs;
        const ReadView kv = kc + kj * r.cs, vv = vc + kj * r.cs;
        if (!started[qj]) {  // the first block of these rows writes directly
          attention_forward(ctx_j, lse_j, qv, kv, vv, bd, drop, w.attn);
          started[qj] = true;
        } else {
          attention_forward(w.blk_ctx, w.blk_lse, qv, kv, vv, bd, drop, w.attn);
          attention_merge(ctx_j, lse_j, w.blk_ctx, w.blk_lse, r.rows, dims.d);
        }
      }
    rk.wait();
    rv.wait();
    sk.wait();
    sv.wait();
  }
  // Every query sees at least its own position (the diagonal block), so each
  // chunk has a result; guard the invariant anyway.
  MT_CHECK(started[0] && started[1], "context-parallel attention: a query chunk saw no key ",
           "block (internal error)");
}

void context_parallel_attention_backward(float* dq, float* dk, float* dv, const float* dctx,
                                         ReadView q, ReadView k, ReadView v, const float* ctx,
                                         const float* lse, const AttentionDims& dims,
                                         const AttentionDropout& drop, const ContextParallel& cp,
                                         float* workspace) {
  check_fp32("context_parallel_attention_backward", q, k, v);
  const RingShape r = ring_shape(dims, cp);
  RingScratch w = carve(workspace, dims, r);
  const Communicator& comm = *cp.cp;
  const int n = int(cp.size()), me = int(cp.rank());
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  const int64_t kv_n = 2 * r.cs;
  // D = rowsum(dctx · ctx) of the merged rows, for every block's softmax backward.
  attention_row_dsum(w.dsum, dctx, ctx, 2 * r.rows, dims.d);
  std::fill(dq, dq + 2 * r.cs, 0.f);
  CommHandle sdk, sdv;  // the accumulator sent last step (its buffer is reused next-but-one)
  for (int t = 0; t < n; ++t) {
    const int src = (me - t + n) % n;
    const float* kc = t == 0 ? k.f32 : w.kv[t % 2];
    const float* vc = t == 0 ? v.f32 : w.kv[t % 2] + kv_n;
    CommHandle sk, sv, rk, rv, rdk, rdv;
    if (t + 1 < n) {
      float* dst = w.kv[(t + 1) % 2];
      rk = comm.irecv(dst, kv_n, prev, kTagK);
      rv = comm.irecv(dst + kv_n, kv_n, prev, kTagV);
      sk = comm.isend(kc, kv_n, next, kTagK);
      sv = comm.isend(vc, kv_n, next, kTagV);
    }
    if (t > 0) {  // src's accumulator, from the ranks that held this block before
      rdk = comm.irecv(w.dkv_in, kv_n, prev, kTagDk);
      rdv = comm.irecv(w.dkv_in + kv_n, kv_n, prev, kTagDv);
    }
    float* part = w.dkv_part[t % 2];  // this rank's dK | dV of src's chunks
    std::fill(part, part + 2 * kv_n, 0.f);
    for (int64_t qj = 0; qj < 2; ++qj)
      for (int64_t kj = 0; kj < 2; ++kj) {
        const AttentionDims bd = block_dims(dims, cp, r.c, qj, src, kj);
        if (fully_masked(bd)) continue;
        attention_backward(w.blk_dq, w.blk_dk, w.blk_dv, dctx + qj * r.cs, q.f32 + qj * r.cs,
                           kc + kj * r.cs, vc + kj * r.cs, ctx + qj * r.cs, lse + qj * r.rows,
                           bd, drop, w.attn, w.dsum + qj * r.rows);
        add(dq + qj * r.cs, w.blk_dq, r.cs);
        add(part + kj * r.cs, w.blk_dk, r.cs);
        add(part + kv_n + kj * r.cs, w.blk_dv, r.cs);
      }
    if (t > 0) {
      rdk.wait();
      rdv.wait();
      add(part, w.dkv_in, 2 * kv_n);
    }
    sdk.wait();  // last step's accumulator left (before this one's send is posted)
    sdv.wait();
    sdk = comm.isend(part, kv_n, next, kTagDk);
    sdv = comm.isend(part + kv_n, kv_n, next, kTagDv);
    rk.wait();
    rv.wait();
    sk.wait();
    sv.wait();
  }
  // The accumulator of this rank's own chunks has been round the ring.
  CommHandle rdk = comm.irecv(dk, kv_n, prev, kTagDk);
  CommHandle rdv = comm.irecv(dv, kv_n, prev, kTagDv);
  rdk.wait();
  rdv.wait();
  sdk.wait();
  sdv.wait();
}

}  // namespace mt
