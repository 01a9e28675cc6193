// bf16 products (see gemm_bf16.h).
//
// VDPBF16PS adds, per fp32 lane, x.lo·y.lo + x.hi·y.hi of two bf16 pairs; a
// pair holds two consecutive k values, so C (i, j) = Σ_p A(i, p) · B(p, j)
// over pair words. A stored (m, k) is pair words already (row i, word p);
// A stored (k, m) and B stored (k, n) are packed by interleaving two rows
// (word (p, col) = x(2p, col) | x(2p + 1, col) << 16); B stored (n, k) by
// transposing its words.
// Blocking (GotoBLAS order): for each block of up to kNc columns and of k
// pairs, all threads pack B into 32-column panels (kc × 32 words, L1-resident
// while used); each thread then walks its kMc-row blocks of A (packed into
// 12-row panels when A is transposed, else read in place: 12 rows' streams)
// and runs the 12 × 32 register tile (24 accumulators) over every panel,
// reading and writing its C tile once per block and prefetching the next.
#include "kernels/gemm_bf16.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "core/arena.h"
#include "core/error.h"
#include "kernels/cpu_isa.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace mt {
namespace {

constexpr int kMr = 12;          // C rows per register tile
constexpr int kNv = 2;           // zmm per tile row: 24 accumulators
constexpr int kNr = 16 * kNv;    // C columns per register tile
constexpr int64_t kMc = 192;     // rows per thread block (a multiple of kMr)
constexpr int64_t kNc = 4096;    // columns per packed B block
constexpr int64_t kKcMax = 384;  // k pairs per block at most (a 32-column panel: 48 KB)

struct Scratch {
  std::mutex mu;
  HostBuffer b;  // packed B block: kKcMax × kNc words
  HostBuffer a;  // per thread, packed A block: kMc × kKcMax words (transposed A)
  HostBuffer c;  // fp32 partial sums of a bf16 C computed in several k blocks
};

Scratch& scratch() {
  static Scratch s;
  return s;
}

template <class T>
T* grown_to(HostBuffer& buf, int64_t count) {
  return static_cast<T*>(grown(buf, size_t(count) * sizeof(T)));
}

// Pairs per k block: all of them up to kKcMax, else equal blocks of ≤ 256.
int64_t block_pairs(int64_t kp) {
  if (kp <= kKcMax) return kp;
  const int64_t blocks = (kp + 255) / 256;
  return (kp + blocks - 1) / blocks;
}

#if defined(__x86_64__)
// Everything down to run() is compiled for AVX512-BF16 whatever the build's
// -march, and runs only where the CPU has it (gemm_bf16_supports).
#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")

// out (kp, ldo) words: out[p][c] = x(r0 + 2p, c0 + c) | x(r0 + 2p + 1, c0 + c) << 16
// for c < w (rows at or past r_end read as zero; columns w..ldo zeroed).
void pack_row_pairs(uint32_t* out, int64_t ldo, const uint16_t* x, int64_t ldx, int64_t r0,
                    int64_t r_end, int64_t kp, int64_t c0, int64_t w) {
  const __m512i first = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
  const __m512i second = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
  for (int64_t p = 0; p < kp; ++p) {
    const int64_t r = r0 + 2 * p;
    uint32_t* o = out + p * ldo;
    const uint16_t* x0 = x + r * ldx + c0;
    int64_t c = 0;
    if (r + 1 < r_end) {
      const uint16_t* x1 = x0 + ldx;
      for (; c + 32 <= w; c += 32) {
        // unpack interleaves within 128-bit lanes: lo holds columns 0-3, 8-11,
        // 16-19, 24-27 of the 32, hi the others; the permutes restore order.
        const __m512i u = _mm512_loadu_si512(x0 + c), v = _mm512_loadu_si512(x1 + c);
        const __m512i lo = _mm512_unpacklo_epi16(u, v), hi = _mm512_unpackhi_epi16(u, v);
        _mm512_storeu_si512(o + c, _mm512_permutex2var_epi64(lo, first, hi));
        _mm512_storeu_si512(o + c + 16, _mm512_permutex2var_epi64(lo, second, hi));
      }
      for (; c < w; ++c) o[c] = uint32_t(x0[c]) | (uint32_t(x1[c]) << 16);
    } else if (r < r_end) {
      for (; c < w; ++c) o[c] = x0[c];
    }
    std::memset(o + c, 0, size_t(ldo - c) * sizeof(uint32_t));
  }
}

// Lane masks of the kNv vectors covering w columns of a panel.
struct Lanes {
  __mmask16 m[kNv];
};
Lanes lanes(int64_t w) {
  Lanes l;
  for (int v = 0; v < kNv; ++v) {
    const int64_t r = std::clamp<int64_t>(w - 16 * v, 0, 16);
    l.m[v] = r == 16 ? __mmask16(0xFFFF) : __mmask16((1u << r) - 1);
  }
  return l;
}

// out (kp, kNr) words: out[p][c] = word p0 + p of row c0 + c of x (rows of
// pair words, row stride ldx words) for c < w, zero beyond.
void pack_transposed(uint32_t* out, const uint32_t* x, int64_t ldx, int64_t p0, int64_t kp,
                     int64_t c0, int64_t w) {
  const Lanes l = lanes(w);
  const __m512i rows =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32(int(ldx)));
  const uint32_t* top = x + c0 * ldx + p0;
  for (int64_t p = 0; p < kp; ++p)
    for (int v = 0; v < kNv; ++v)
      _mm512_storeu_si512(out + p * kNr + 16 * v,
                          l.m[v] ? _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), l.m[v], rows,
                                                               top + 16 * v * ldx + p, 4)
                                 : _mm512_setzero_si512());
}

// Where a register tile starts (in, bias: may be null) and ends (out or out16).
struct TileIo {
  const float* in;
  int64_t ld_in;
  const float* bias;
  float* out;
  uint16_t* out16;
  int64_t ld_out;
  const float* next_in;  // the next tile's `in`, prefetched (may be null)
};

// C tile (MR × kNr, columns masked by l) = in (or 0) + bias + Σ_p
// A(r, p) B(p, ·), with A(r, p) at a[r·rs + p·ps] and B a packed panel.
template <int MR>
void tile(const TileIo& io, const uint32_t* a, int64_t rs, int64_t ps, const uint32_t* b,
          int64_t kp, const Lanes& l) {
  if (io.next_in != nullptr) {  // the next tile's C lines arrive during this one
#pragma GCC unroll 16
    for (int r = 0; r < kMr; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < kNv; ++v)
        _mm_prefetch(reinterpret_cast<const char*>(io.next_in + r * io.ld_in + 16 * v),
                     _MM_HINT_T0);
  }
  __m512 c[MR][kNv];
#pragma GCC unroll 4
  for (int v = 0; v < kNv; ++v) {
    const __m512 bias =
        io.bias ? _mm512_maskz_loadu_ps(l.m[v], io.bias + 16 * v) : _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
      c[r][v] =
          io.in ? _mm512_add_ps(bias, _mm512_maskz_loadu_ps(l.m[v], io.in + r * io.ld_in + 16 * v))
                : bias;
  }
  for (int64_t p = 0; p < kp; ++p) {
    __m512bh bv[kNv];
#pragma GCC unroll 4
    for (int v = 0; v < kNv; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + p * kNr + 16 * v);
    const uint32_t* ap = a + p * ps;
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(int(ap[r * rs]));
#pragma GCC unroll 4
      for (int v = 0; v < kNv; ++v) c[r][v] = _mm512_dpbf16_ps(c[r][v], av, bv[v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kNv; ++v) {
      if (io.out16 != nullptr)
        _mm256_mask_storeu_epi16(io.out16 + r * io.ld_out + 16 * v, l.m[v],
                                 (__m256i)_mm512_cvtneps_pbh(c[r][v]));
      else
        _mm512_mask_storeu_ps(io.out + r * io.ld_out + 16 * v, l.m[v], c[r][v]);
    }
}

// tile<mr> for a run-time mr in [1, MR].
template <int MR>
void tile_rows(int mr, const TileIo& io, const uint32_t* a, int64_t rs, int64_t ps,
               const uint32_t* b, int64_t kp, const Lanes& l) {
  if constexpr (MR > 0) {
    if (mr == MR) return tile<MR>(io, a, rs, ps, b, kp, l);
    tile_rows<MR - 1>(mr, io, a, rs, ps, b, kp, l);
  }
}

// C rows [ic, ic + mc) × this thread's panels of one (column, k) block.
struct Block {
  int64_t jc, pc, kc;
  bool first, last;
};

void multiply_rows(const Bf16Gemm& g, const Block& bk, int64_t ic, int64_t mc, int64_t p_begin,
                   int64_t p_end, const uint32_t* pb, uint32_t* pa, float* partial,
                   int64_t ld_partial) {
  const int64_t kc = bk.kc;
  const uint32_t* a = nullptr;
  int64_t rs = 0, ps = 0;
  if (g.trans_a) {
    for (int64_t ir = 0; ir < mc; ir += kMr) {
      const int64_t mr = std::min<int64_t>(kMr, mc - ir);
      pack_row_pairs(pa + ir * kc, mr, g.a, g.lda, 2 * bk.pc, g.k, kc, ic + ir, mr);
    }
  } else {
    rs = g.lda / 2;
    ps = 1;
    a = reinterpret_cast<const uint32_t*>(g.a) + ic * rs + bk.pc;
  }
  // Where sums start and end: fp32 C, or the fp32 partial of a bf16 C.
  float* sums = g.c_bf16 ? partial : g.c;
  const int64_t ld_sums = g.c_bf16 ? ld_partial : g.ldc;
  const float* in = bk.first ? (g.accumulate ? g.c : nullptr) : sums;
  const int64_t ld_in = bk.first ? g.ldc : ld_sums;
  const bool to_bf16 = bk.last && g.c_bf16 != nullptr;
  const int64_t ld_out = to_bf16 ? g.ldc : ld_sums;
  for (int64_t jp = p_begin; jp < p_end; ++jp) {
    const int64_t j = bk.jc + jp * kNr, w = std::min<int64_t>(kNr, g.n - j);
    const Lanes l = lanes(w);
    const uint32_t* bp = pb + jp * kNr * kc;
    for (int64_t ir = 0; ir < mc; ir += kMr) {
      const int64_t i = ic + ir;
      TileIo io{};
      io.in = in ? in + i * ld_in + j : nullptr;
      io.ld_in = ld_in;
      io.bias = bk.first && g.bias ? g.bias + j : nullptr;
      io.out = to_bf16 ? nullptr : sums + i * ld_out + j;
      io.out16 = to_bf16 ? g.c_bf16 + i * ld_out + j : nullptr;
      io.ld_out = ld_out;
      if (in) {
        io.next_in = ir + kMr < mc    ? in + (i + kMr) * ld_in + j
                     : jp + 1 < p_end ? in + ic * ld_in + j + kNr
                                      : nullptr;
      }
      const uint32_t* at = g.trans_a ? pa + ir * kc : a + ir * rs;
      tile_rows<kMr>(int(std::min<int64_t>(kMr, mc - ir)), io, at, g.trans_a ? 1 : rs,
                     g.trans_a ? std::min<int64_t>(kMr, mc - ir) : ps, bp, kc, l);
    }
  }
}

void run(const Bf16Gemm& g, uint32_t* pb, uint32_t* pa_all, float* partial, int threads) {
  const int64_t kp = (g.k + 1) / 2, kc_max = block_pairs(kp);
  const int64_t row_tiles = (g.m + kMr - 1) / kMr;
  // Threads split C's rows when there are enough of them, else its panels.
  const bool split_rows = row_tiles >= 4 * threads;
#pragma omp parallel num_threads(threads)
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    uint32_t* pa = pa_all + tid * kMc * kKcMax;
    int64_t i_begin = 0, i_end = g.m;
    if (split_rows) {
      const int64_t per = (row_tiles + nt - 1) / nt;
      i_begin = std::min(g.m, tid * per * kMr);
      i_end = std::min(g.m, (tid + 1) * per * kMr);
    }
    for (int64_t jc = 0; jc < g.n; jc += kNc) {
      const int64_t panels = (std::min(kNc, g.n - jc) + kNr - 1) / kNr;
      int64_t p_begin = 0, p_end = panels;
      if (!split_rows) {
        const int64_t per = (panels + nt - 1) / nt;
        p_begin = std::min(panels, tid * per);
        p_end = std::min(panels, (tid + 1) * per);
      }
      for (int64_t pc = 0; pc < kp; pc += kc_max) {
        const Block bk{jc, pc, std::min(kc_max, kp - pc), pc == 0, pc + kc_max >= kp};
#pragma omp for schedule(static)
        for (int64_t jp = 0; jp < panels; ++jp) {
          const int64_t j = jc + jp * kNr, w = std::min<int64_t>(kNr, g.n - j);
          uint32_t* out = pb + jp * kNr * bk.kc;
          if (g.trans_b)
            pack_transposed(out, reinterpret_cast<const uint32_t*>(g.b), g.ldb / 2, pc, bk.kc, j,
                            w);
          else
            pack_row_pairs(out, kNr, g.b, g.ldb, 2 * pc, g.k, bk.kc, j, w);
        }
        // (the loop's barrier: B's block is whole before anyone multiplies)
        for (int64_t ic = i_begin; ic < i_end; ic += kMc)
          multiply_rows(g, bk, ic, std::min(kMc, i_end - ic), p_begin, p_end, pb, pa, partial, g.n);
#pragma omp barrier  // the next block rewrites B's panels
      }
    }
  }
}

#pragma GCC pop_options
#endif  // __x86_64__

}  // namespace

bool gemm_bf16_supports(const Bf16Gemm& g) {
#if defined(__x86_64__)
  if (active_isa() < Isa::kAvx512 || !cpu_has_avx512_bf16()) return false;
  const auto word_aligned = [](const uint16_t* p) {
    return reinterpret_cast<uintptr_t>(p) % 4 == 0;
  };
  if (!g.trans_a && (g.k % 2 || g.lda % 2 || !word_aligned(g.a))) return false;
  if (g.trans_b && (g.k % 2 || g.ldb % 2 || !word_aligned(g.b))) return false;
  return true;
#else
  (void)g;
  return false;
#endif
}

void gemm_bf16(const Bf16Gemm& g) {
  MT_CHECK(g.m >= 1 && g.n >= 1 && g.k >= 1 && g.a && g.b && (g.c || g.c_bf16),
           "gemm_bf16: bad shape m=", g.m, " n=", g.n, " k=", g.k,
           "; fix: positive sizes and non-null operands");
  MT_CHECK(g.lda >= (g.trans_a ? g.m : g.k) && g.ldb >= (g.trans_b ? g.k : g.n) && g.ldc >= g.n,
           "gemm_bf16: row stride shorter than the row: lda=", g.lda, " ldb=", g.ldb,
           " ldc=", g.ldc, "; fix: pass the stored matrices' row strides");
  MT_CHECK(!(g.c_bf16 && g.accumulate),
           "gemm_bf16: a bf16 C cannot accumulate "
           "(internal error: accumulate into fp32)");
  MT_CHECK(gemm_bf16_supports(g),
           "gemm_bf16: this CPU, path or shape is not supported (internal "
           "error: check gemm_bf16_supports() first)");
#if defined(__x86_64__)
  Scratch& s = scratch();
  std::lock_guard<std::mutex> lock(s.mu);
  const int threads = omp_get_max_threads();
  const int64_t kp = (g.k + 1) / 2;
  const int64_t block_columns = std::min(kNc, (g.n + kNr - 1) / kNr * kNr);
  uint32_t* pb = grown_to<uint32_t>(s.b, block_pairs(kp) * block_columns);
  uint32_t* pa = g.trans_a ? grown_to<uint32_t>(s.a, threads * kMc * kKcMax) : nullptr;
  const bool several_blocks = block_pairs(kp) < kp;
  float* partial = g.c_bf16 && several_blocks ? grown_to<float>(s.c, g.m * g.n) : nullptr;
  run(g, pb, pa, partial, threads);
#endif
}

int64_t gemm_bf16_scratch_bytes() {
  Scratch& s = scratch();
  std::lock_guard<std::mutex> lock(s.mu);
  return int64_t(s.a.size() + s.b.size() + s.c.size());
}

}  // namespace mt
