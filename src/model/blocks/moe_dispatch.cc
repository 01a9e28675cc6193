#include "model/blocks/moe_dispatch.h"

#include <algorithm>

#include "backend/device.h"
#include "core/error.h"
#include "kernels/moe_permute.h"

namespace mt {

namespace {

bool single(const GptShapes& sh) { return moe_of(sh).ep_size() == 1; }

// The exchange buffer `buf` as a view of the activations' storage.
WriteView as_act(float* buf, ReadView like) {
  if (like.bf16) return reinterpret_cast<uint16_t*>(buf);
  return buf;
}

// split = chunks of rows[i] · width elements, in place (no allocation: the
// split has EP entries already).
void rows_split(ChunkSplit& split, const std::vector<int64_t>& rows, int64_t width) {
  int64_t at = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    MT_CHECK(rows[i] * width <= INT32_MAX && at <= INT32_MAX, "MoE exchange of ", rows[i] * width,
             " elements exceeds an MPI count; fix: a smaller micro-batch or more EP ranks");
    split.counts[i] = int(rows[i] * width);
    split.displs[i] = int(at);
    at += rows[i] * width;
  }
}

// all_to_all_v of `width`-wide rows (fp32, or bf16 when `bf16`) from this
// rank's send_rows to its recv_rows (MoeHostScratch); one rank: a copy.
void exchange(const GptShapes& sh, MoeHostScratch& hs, void* out, const void* in, int64_t width,
              bool bf16, bool back) {
  const std::vector<int64_t>& to = back ? hs.recv_rows : hs.send_rows;
  const std::vector<int64_t>& from = back ? hs.send_rows : hs.recv_rows;
  if (single(sh)) {
    copy_bytes(out, in, size_t(to[0] * width) * (bf16 ? 2 : 4));
    return;
  }
  ChunkSplit& rs = hs.recv_split;
  ChunkSplit& ss = hs.send_split;
  rows_split(rs, from, width);
  rows_split(ss, to, width);
  const Communicator* ep = moe_of(sh).ep;
  if (bf16)
    ep->all_to_all_v(static_cast<uint16_t*>(out), rs, static_cast<const uint16_t*>(in), ss);
  else
    ep->all_to_all_v(static_cast<float*>(out), rs, static_cast<const float*>(in), ss);
}

void gather(const GptShapes& sh, void* out, const void* in, int64_t n, bool bf16) {
  if (single(sh))
    copy_bytes(out, in, size_t(n) * (bf16 ? 2 : 4));
  else if (bf16)
    moe_of(sh).ep->all_gather(static_cast<uint16_t*>(out), static_cast<const uint16_t*>(in), n);
  else
    moe_of(sh).ep->all_gather(static_cast<float*>(out), static_cast<const float*>(in), n);
}

void reduce_scatter(const GptShapes& sh, float* out, const float* in, int64_t n) {
  if (single(sh))
    copy_bytes(out, in, size_t(n) * sizeof(float));
  else
    moe_of(sh).ep->reduce_scatter_sum(out, in, n);
}

int64_t local_experts(const GptShapes& sh) { return moe_of(sh).local; }

// --moe-grouped-gemm: every local expert gets the rows of the busiest one
// (padded), so that they run as one batched product.
int64_t grouped_rows(const MoeRecord& rec, const GptShapes& sh) {
  const int64_t E = moe_of(sh).experts;
  int64_t most = 0;
  for (int64_t e = moe_of(sh).first; e < moe_of(sh).first + moe_of(sh).local; ++e) {
    int64_t c = 0;
    for (int64_t s = 0; s < moe_of(sh).ep_size(); ++s) c += rec.counts_all[s * E + e];
    most = std::max(most, c);
  }
  return expert_padded_rows(sh, most);
}

// Rows this rank sends to / receives from each EP rank (all-to-all), into
// the host scratch, from rec.counts_all.
void count_rows(MoeHostScratch& hs, const MoeRecord& rec, const GptShapes& sh) {
  const int64_t E = moe_of(sh).experts, L = local_experts(sh), me = moe_of(sh).ep_rank();
  const int64_t first = moe_of(sh).first;
  std::fill(hs.send_rows.begin(), hs.send_rows.end(), 0);
  std::fill(hs.recv_rows.begin(), hs.recv_rows.end(), 0);
  for (int64_t e = 0; e < E; ++e) hs.send_rows[size_t(e / L)] += rec.counts_all[me * E + e];
  for (int64_t s = 0; s < moe_of(sh).ep_size(); ++s)
    for (int64_t e = first; e < first + L; ++e)
      hs.recv_rows[size_t(s)] += rec.counts_all[s * E + e];
}

// This rank's kept pairs sorted by (expert, token, choice): rec.perm and its
// per-expert counts in row ep_rank of rec.counts_all (other rows zero).
int64_t sort_pairs(MoeRecord& rec, MoeHostScratch& hs, const GptShapes& sh) {
  const int64_t n = sh.local_tokens(), k = moe_of(sh).topk, E = moe_of(sh).experts;
  int64_t* counts = rec.counts_all + moe_of(sh).ep_rank() * E;
  std::fill(rec.counts_all, rec.counts_all + moe_of(sh).ep_size() * E, 0);
  for (int64_t p = 0; p < n * k; ++p)
    if (rec.kept[p]) ++counts[rec.expert[p]];
  std::vector<int64_t>& next = hs.next;  // (E)
  next[0] = 0;
  for (int64_t e = 1; e < E; ++e) next[size_t(e)] = next[size_t(e - 1)] + counts[e - 1];
  int64_t sent = 0;
  for (int64_t p = 0; p < n * k; ++p)
    if (rec.kept[p]) {
      const int64_t at = next[size_t(rec.expert[p])]++;
      rec.perm[at] = p;
      rec.perm_tok[at] = p / k;
      ++sent;
    }
  return sent;
}

// Fills rec.src with `row_of(s, e, i)` — the exchange row of the i-th pair of
// EP rank s for local expert e — expert by expert, padded with -1.
template <class RowOf>
int64_t lay_out_expert_rows(MoeRecord& rec, const GptShapes& sh, RowOf row_of) {
  const int64_t E = moe_of(sh).experts, L = local_experts(sh);
  const int64_t uniform = moe_of(sh).grouped ? grouped_rows(rec, sh) : -1;
  int64_t r = 0;
  for (int64_t i = 0; i < L; ++i) {
    const int64_t e = moe_of(sh).first + i, begin = r;
    for (int64_t s = 0; s < moe_of(sh).ep_size(); ++s)
      for (int64_t j = 0; j < rec.counts_all[s * E + e]; ++j) rec.src[r++] = row_of(s, e, j);
    const int64_t end = begin + (uniform >= 0 ? uniform : expert_padded_rows(sh, r - begin));
    MT_CHECK(end <= moe_of(sh).max_rows, "MoE layer: ", end, " expert rows exceed the planned ",
             moe_of(sh).max_rows, " (internal error)");
    while (r < end) rec.src[r++] = -1;
  }
  return r;
}

}  // namespace

int64_t moe_padded_rows(int64_t m) {
  if (m <= 0) return 0;
  int64_t step = 1;
  while (step * 2 <= m) step *= 2;
  step = std::max<int64_t>(8, step / 8);
  return (m + step - 1) / step * step;
}

int64_t expert_padded_rows(const GptShapes& sh, int64_t m) {
  const MoeShapes& moe = moe_of(sh);
  return moe.pad_to_capacity ? moe.ep_size() * moe.capacity : moe_padded_rows(m);
}

ExpertRows expert_rows(const MoeRecord& rec, const GptShapes& sh, int64_t i) {
  const int64_t E = moe_of(sh).experts;
  const int64_t uniform = moe_of(sh).grouped ? grouped_rows(rec, sh) : -1;
  ExpertRows out;
  for (int64_t x = 0; x <= i; ++x) {
    const int64_t e = moe_of(sh).first + x;
    out.begin += out.padded;
    out.count = 0;
    for (int64_t s = 0; s < moe_of(sh).ep_size(); ++s) out.count += rec.counts_all[s * E + e];
    out.padded = uniform >= 0 ? uniform : expert_padded_rows(sh, out.count);
  }
  return out;
}

void moe_dispatch_forward(MoeRecord& rec, MoeWorkspace& ws, const GptShapes& sh) {
  const int64_t n = sh.local_tokens(), k = moe_of(sh).topk, h = sh.h, E = moe_of(sh).experts;
  const int64_t ep = moe_of(sh).ep_size();
  const bool bf16 = rec.in.bf16 != nullptr;
  MT_CHECK(ep == 1 || moe_of(sh).ep != nullptr, "an MoE layer of EP ", ep,
           " without its expert-parallel group (internal error: shapes made for planning)");
  MoeHostScratch& hs = *ws.host;
  const int64_t sent = sort_pairs(rec, hs, sh);
  int64_t received = 0, rows = 0;
  if (moe_of(sh).alltoall || ep == 1) {
    // Everyone's counts, then this rank's pairs' tokens (and gates) to their
    // experts (one rank: no exchange, the expert rows gather the tokens below).
    if (ep > 1) {
      moe_of(sh).ep->all_reduce_sum(rec.counts_all, ep * E);
      gather_rows(as_act(ws.xa, rec.in), rec.in, rec.perm_tok, sent, h);
      for (int64_t i = 0; i < sent; ++i) ws.va[i] = rec.gate[rec.perm[i]];
      count_rows(hs, rec, sh);
      exchange(sh, hs, ws.xb, ws.xa, h, bf16, false);
      exchange(sh, hs, ws.vb, ws.va, 1, false, false);
    }
    // Received rows come source by source, each source's by expert.
    std::vector<int64_t>& start = hs.start;  // (EP·E) first received row of (s, e)
    for (int64_t s = 0, r = 0; s < ep; ++s)
      for (int64_t e = moe_of(sh).first; e < moe_of(sh).first + moe_of(sh).local; ++e) {
        start[size_t(s * E + e)] = r;
        r += rec.counts_all[s * E + e];
        received = r;
      }
    rows = lay_out_expert_rows(
        rec, sh, [&](int64_t s, int64_t e, int64_t j) { return start[size_t(s * E + e)] + j; });
    for (int64_t r = 0; r < rows; ++r)
      if (rec.src[r] >= 0) rec.inv[rec.src[r]] = r;
    if (ep == 1) {  // the exchange row is the sorted pair: its token and gate, directly
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = rec.src[r];
        rec.pair[r] = i < 0 ? -1 : rec.perm_tok[i];
        rec.gate_rows[r] = i < 0 ? 0.f : rec.gate[rec.perm[i]];
      }
      gather_rows(rec.xin, rec.in, rec.pair, rows, h);
    } else {
      gather_rows(rec.xin, as_act(ws.xb, rec.in), rec.src, rows, h);
      for (int64_t r = 0; r < rows; ++r)
        rec.gate_rows[r] = rec.src[r] < 0 ? 0.f : ws.vb[rec.src[r]];
    }
  } else {
    // Every rank's tokens and routing (expert id, or -1 when dropped, and gate).
    gather(sh, ws.xb, rec.in.raw(), n * h, bf16);
    for (int64_t p = 0; p < n * k; ++p) {
      ws.va[p] = rec.kept[p] ? float(rec.expert[p]) : -1.f;
      ws.va[n * k + p] = rec.gate[p];
    }
    float* codes = ws.vb;               // (EP, n·k)
    float* gates = ws.vb + ep * n * k;  // (EP, n·k)
    gather(sh, codes, ws.va, n * k, false);
    gather(sh, gates, ws.va + n * k, n * k, false);
    std::fill(rec.counts_all, rec.counts_all + ep * E, 0);
    for (int64_t s = 0; s < ep; ++s)
      for (int64_t p = 0; p < n * k; ++p)
        if (codes[s * n * k + p] >= 0) ++rec.counts_all[s * E + int64_t(codes[s * n * k + p])];
    // Each local expert's pairs, source by source, in (token, choice) order:
    // a counting sort into hs.order, local expert i's from hs.start[i].
    const int64_t L = moe_of(sh).local;
    auto local_of = [&](int64_t q) {  // q = s·n·k + p: its local expert, or -1
      const int64_t e = int64_t(codes[q]) - moe_of(sh).first;
      return codes[q] >= 0 && e >= 0 && e < L ? e : -1;
    };
    std::fill(hs.start.begin(), hs.start.begin() + L + 1, 0);
    for (int64_t q = 0; q < ep * n * k; ++q)
      if (const int64_t e = local_of(q); e >= 0) ++hs.start[size_t(e + 1)];
    for (int64_t i = 0; i < L; ++i) hs.start[size_t(i + 1)] += hs.start[size_t(i)];
    std::copy(hs.start.begin(), hs.start.begin() + L, hs.next.begin());
    for (int64_t q = 0; q < ep * n * k; ++q)
      if (const int64_t e = local_of(q); e >= 0) hs.order[size_t(hs.next[size_t(e)]++)] = q;
    std::copy(hs.start.begin(), hs.start.begin() + L, hs.next.begin());
    rows = lay_out_expert_rows(rec, sh, [&](int64_t, int64_t e, int64_t) {
      return hs.order[size_t(hs.next[size_t(e - moe_of(sh).first)]++)] / k;  // s·n + t
    });
    for (int64_t i = 0; i < L; ++i) {
      const ExpertRows er = expert_rows(rec, sh, i);
      for (int64_t r = er.begin; r < er.begin + er.padded; ++r)
        rec.pair[r] =
            r < er.begin + er.count ? hs.order[size_t(hs.start[size_t(i)] + r - er.begin)] : -1;
    }
    gather_rows(rec.xin, as_act(ws.xb, rec.in), rec.src, rows, h);
    for (int64_t r = 0; r < rows; ++r)
      rec.gate_rows[r] = rec.pair[r] < 0 ? 0.f : gates[rec.pair[r]];
    received = ep * n;
  }
  rec.meta[0] = sent;
  rec.meta[1] = received;
  rec.meta[2] = rows;
}

void moe_rows_to_tokens(float* out, const float* z, const MoeRecord& rec, MoeWorkspace& ws,
                        const GptShapes& sh) {
  const int64_t n = sh.local_tokens(), h = sh.h;
  const int64_t sent = rec.meta[0], received = rec.meta[1], rows = rec.meta[2];
  fill_zero(out, size_t(n * h) * sizeof(float));
  if (single(sh)) {  // each expert row adds into its token, in the pairs' sorted order
    scatter_add_rows(out, z, rec.pair, nullptr, rows, h);
  } else if (moe_of(sh).alltoall) {
    gather_rows(ws.xb, z, rec.inv, received, h);  // back in received order
    count_rows(*ws.host, rec, sh);
    exchange(sh, *ws.host, ws.xa, ws.xb, h, false, true);
    scatter_add_rows(out, ws.xa, rec.perm_tok, nullptr, sent, h);
  } else {
    fill_zero(ws.xa, size_t(moe_of(sh).ep_size() * n * h) * sizeof(float));
    scatter_add_rows(ws.xa, z, rec.src, nullptr, rows, h);
    reduce_scatter(sh, out, ws.xa, n * h);
  }
}

void moe_tokens_to_rows(float* dz, const float* dout, const MoeRecord& rec, MoeWorkspace& ws,
                        const GptShapes& sh) {
  const int64_t n = sh.local_tokens(), h = sh.h;
  const int64_t sent = rec.meta[0], rows = rec.meta[2];
  if (single(sh)) {  // each expert row reads its token's
    gather_rows(dz, dout, rec.pair, rows, h);
    return;
  }
  if (moe_of(sh).alltoall) {
    gather_rows(ws.xa, dout, rec.perm_tok, sent, h);
    count_rows(*ws.host, rec, sh);
    exchange(sh, *ws.host, ws.xb, ws.xa, h, false, false);
  } else {
    gather(sh, ws.xb, dout, n * h, false);
  }
  gather_rows(dz, ws.xb, rec.src, rows, h);
}

void moe_gate_grad_back(float* dgate, const float* drow, const MoeRecord& rec, MoeWorkspace& ws,
                        const GptShapes& sh) {
  const int64_t n = sh.local_tokens(), k = moe_of(sh).topk;
  const int64_t sent = rec.meta[0], received = rec.meta[1], rows = rec.meta[2];
  fill_zero(dgate, size_t(n * k) * sizeof(float));
  if (moe_of(sh).alltoall || single(sh)) {
    for (int64_t i = 0; i < received; ++i) ws.va[i] = drow[rec.inv[i]];
    count_rows(*ws.host, rec, sh);
    exchange(sh, *ws.host, ws.vb, ws.va, 1, false, true);
    for (int64_t i = 0; i < sent; ++i) dgate[rec.perm[i]] = ws.vb[i];
  } else {
    fill_zero(ws.va, size_t(moe_of(sh).ep_size() * n * k) * sizeof(float));
    for (int64_t r = 0; r < rows; ++r)
      if (rec.pair[r] >= 0) ws.va[rec.pair[r]] = drow[r];
    reduce_scatter(sh, dgate, ws.va, n * k);
  }
}

}  // namespace mt
