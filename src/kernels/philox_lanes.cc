// Philox4x32-10 in vector lanes (see philox_lanes.h). Lane i of a register
// holds block first + i; a round is, per lane (RngStream's round):
//   hi0:lo0 = kM0 · c0,  hi1:lo1 = kM1 · c2   (32 x 32 -> 64 bits)
//   c = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0),  k += (kW0, kW1)
// The high words come from VPMULUDQ, which multiplies the even 32-bit lanes
// into 64-bit ones: once on the even lanes, once on the odd lanes shifted
// down, then blended; the low words from VPMULLD. Each path is a function of
// its own instruction set (target attribute), so one build serves every CPU.
#include "kernels/philox_lanes.h"

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/error.h"

namespace mt {
namespace {

constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;

void blocks_scalar(uint32_t* words, uint64_t first, int64_t count, const RngStream& rng) {
  for (int64_t i = 0; i < count; ++i) {
    const Philox4 r = rng.block(first + uint64_t(i));
    std::memcpy(words + 4 * i, r.v, sizeof(r.v));
  }
}

#if defined(__x86_64__)

// Two registers of blocks per call, as two independent chains: a round is a
// chain of multiplies (VPMULLD takes 10 cycles), which one register alone
// leaves mostly waiting (measured: bench_cpu_paths's dropout_multipliers).
constexpr int kChains = 2;

// 16 blocks from `first`: words (64) [=].
MT_TARGET_AVX2 void blocks_avx2(uint32_t* words, uint64_t first, const RngStream& rng) {
  const __m256i m0 = _mm256_set1_epi32(int(kM0)), m1 = _mm256_set1_epi32(int(kM1));
  const __m256i sign = _mm256_set1_epi32(int(0x80000000u));
  const __m256i first_lo = _mm256_set1_epi32(int(uint32_t(first)));
  const __m256i first_hi = _mm256_set1_epi32(int(uint32_t(first >> 32)));
  __m256i c0[kChains], c1[kChains], c2[kChains], c3[kChains];
  for (int g = 0; g < kChains; ++g) {
    c0[g] = _mm256_add_epi32(first_lo, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    c0[g] = _mm256_add_epi32(c0[g], _mm256_set1_epi32(8 * g));
    // Carry into the high word where the low one wrapped (c0 < first_lo,
    // unsigned: compared signed after flipping the sign bits); -1 per carry.
    const __m256i carry =
        _mm256_cmpgt_epi32(_mm256_xor_si256(first_lo, sign), _mm256_xor_si256(c0[g], sign));
    c1[g] = _mm256_sub_epi32(first_hi, carry);
    c2[g] = _mm256_set1_epi32(int(uint32_t(rng.step)));
    c3[g] = _mm256_set1_epi32(int(uint32_t(rng.step >> 32)));
  }
  uint32_t k0 = rng.k0, k1 = rng.k1;
  for (int r = 0; r < 10; ++r) {
    const __m256i key0 = _mm256_set1_epi32(int(k0)), key1 = _mm256_set1_epi32(int(k1));
#pragma GCC unroll 2
    for (int g = 0; g < kChains; ++g) {
      const __m256i e0 = _mm256_mul_epu32(c0[g], m0);
      const __m256i o0 = _mm256_mul_epu32(_mm256_srli_epi64(c0[g], 32), m0);
      const __m256i e1 = _mm256_mul_epu32(c2[g], m1);
      const __m256i o1 = _mm256_mul_epu32(_mm256_srli_epi64(c2[g], 32), m1);
      const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(e0, 32), o0, 0xAA);
      const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(e1, 32), o1, 0xAA);
      const __m256i lo0 = _mm256_mullo_epi32(c0[g], m0), lo1 = _mm256_mullo_epi32(c2[g], m1);
      c0[g] = _mm256_xor_si256(_mm256_xor_si256(hi1, c1[g]), key0);
      c2[g] = _mm256_xor_si256(_mm256_xor_si256(hi0, c3[g]), key1);
      c1[g] = lo1;
      c3[g] = lo0;
    }
    k0 += kW0;
    k1 += kW1;
  }
  // Transpose (c0, c1, c2, c3) x 8 lanes into 8 blocks of four words: the
  // unpacks build blocks i and i + 4 in the two 128-bit halves.
  for (int g = 0; g < kChains; ++g) {
    const __m256i a = _mm256_unpacklo_epi32(c0[g], c1[g]), b = _mm256_unpackhi_epi32(c0[g], c1[g]);
    const __m256i c = _mm256_unpacklo_epi32(c2[g], c3[g]), d = _mm256_unpackhi_epi32(c2[g], c3[g]);
    const __m256i blk04 = _mm256_unpacklo_epi64(a, c), blk15 = _mm256_unpackhi_epi64(a, c);
    const __m256i blk26 = _mm256_unpacklo_epi64(b, d), blk37 = _mm256_unpackhi_epi64(b, d);
    auto* out = reinterpret_cast<__m256i*>(words + 32 * g);
    _mm256_storeu_si256(out + 0, _mm256_permute2x128_si256(blk04, blk15, 0x20));
    _mm256_storeu_si256(out + 1, _mm256_permute2x128_si256(blk26, blk37, 0x20));
    _mm256_storeu_si256(out + 2, _mm256_permute2x128_si256(blk04, blk15, 0x31));
    _mm256_storeu_si256(out + 3, _mm256_permute2x128_si256(blk26, blk37, 0x31));
  }
}

// 32 blocks from `first`: words (128) [=].
MT_TARGET_AVX512 void blocks_avx512(uint32_t* words, uint64_t first, const RngStream& rng) {
  const __m512i m0 = _mm512_set1_epi32(int(kM0)), m1 = _mm512_set1_epi32(int(kM1));
  const __m512i first_lo = _mm512_set1_epi32(int(uint32_t(first)));
  const __m512i first_hi = _mm512_set1_epi32(int(uint32_t(first >> 32)));
  // All-lanes masks: the maskz forms avoid GCC 12's false -Wmaybe-uninitialized
  // on the unmasked intrinsics.
  constexpr __mmask8 kAll8 = 0xFF;
  constexpr __mmask16 kAll16 = 0xFFFF;
  __m512i c0[kChains], c1[kChains], c2[kChains], c3[kChains];
  for (int g = 0; g < kChains; ++g) {
    c0[g] = _mm512_add_epi32(
        first_lo, _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    c0[g] = _mm512_add_epi32(c0[g], _mm512_set1_epi32(16 * g));
    // Carried into c1 where it wrapped.
    c1[g] = _mm512_mask_add_epi32(first_hi, _mm512_cmplt_epu32_mask(c0[g], first_lo), first_hi,
                                  _mm512_set1_epi32(1));
    c2[g] = _mm512_set1_epi32(int(uint32_t(rng.step)));
    c3[g] = _mm512_set1_epi32(int(uint32_t(rng.step >> 32)));
  }
  uint32_t k0 = rng.k0, k1 = rng.k1;
  for (int r = 0; r < 10; ++r) {
    const __m512i key0 = _mm512_set1_epi32(int(k0)), key1 = _mm512_set1_epi32(int(k1));
#pragma GCC unroll 2
    for (int g = 0; g < kChains; ++g) {
      const __m512i e0 = _mm512_maskz_mul_epu32(kAll8, c0[g], m0);
      const __m512i o0 =
          _mm512_maskz_mul_epu32(kAll8, _mm512_maskz_srli_epi64(kAll8, c0[g], 32), m0);
      const __m512i e1 = _mm512_maskz_mul_epu32(kAll8, c2[g], m1);
      const __m512i o1 =
          _mm512_maskz_mul_epu32(kAll8, _mm512_maskz_srli_epi64(kAll8, c2[g], 32), m1);
      const __m512i hi0 =
          _mm512_mask_blend_epi32(0xAAAA, _mm512_maskz_srli_epi64(kAll8, e0, 32), o0);
      const __m512i hi1 =
          _mm512_mask_blend_epi32(0xAAAA, _mm512_maskz_srli_epi64(kAll8, e1, 32), o1);
      const __m512i lo0 = _mm512_mullo_epi32(c0[g], m0), lo1 = _mm512_mullo_epi32(c2[g], m1);
      c0[g] = _mm512_xor_si512(_mm512_xor_si512(hi1, c1[g]), key0);
      c2[g] = _mm512_xor_si512(_mm512_xor_si512(hi0, c3[g]), key1);
      c1[g] = lo1;
      c3[g] = lo0;
    }
    k0 += kW0;
    k1 += kW1;
  }
  // Transpose as the AVX2 path: the unpacks leave blocks i, i + 4, i + 8,
  // i + 12 in the four 128-bit lanes of one register; two rounds of lane
  // shuffles put blocks 4j .. 4j + 3 in register j.
  constexpr int kEven = _MM_SHUFFLE(2, 0, 2, 0), kOdd = _MM_SHUFFLE(3, 1, 3, 1);
  for (int g = 0; g < kChains; ++g) {
    const __m512i a = _mm512_maskz_unpacklo_epi32(kAll16, c0[g], c1[g]);
    const __m512i b = _mm512_maskz_unpackhi_epi32(kAll16, c0[g], c1[g]);
    const __m512i c = _mm512_maskz_unpacklo_epi32(kAll16, c2[g], c3[g]);
    const __m512i d = _mm512_maskz_unpackhi_epi32(kAll16, c2[g], c3[g]);
    const __m512i e = _mm512_maskz_unpacklo_epi64(kAll8, a, c);
    const __m512i f = _mm512_maskz_unpackhi_epi64(kAll8, a, c);
    const __m512i h0 = _mm512_maskz_unpacklo_epi64(kAll8, b, d);
    const __m512i h1 = _mm512_maskz_unpackhi_epi64(kAll8, b, d);
    const __m512i t0 = _mm512_maskz_shuffle_i32x4(kAll16, e, f, kEven);
    const __m512i t1 = _mm512_maskz_shuffle_i32x4(kAll16, h0, h1, kEven);
    const __m512i t2 = _mm512_maskz_shuffle_i32x4(kAll16, e, f, kOdd);
    const __m512i t3 = _mm512_maskz_shuffle_i32x4(kAll16, h0, h1, kOdd);
    uint32_t* out = words + 64 * g;
    _mm512_storeu_si512(out, _mm512_maskz_shuffle_i32x4(kAll16, t0, t1, kEven));
    _mm512_storeu_si512(out + 16, _mm512_maskz_shuffle_i32x4(kAll16, t2, t3, kEven));
    _mm512_storeu_si512(out + 32, _mm512_maskz_shuffle_i32x4(kAll16, t0, t1, kOdd));
    _mm512_storeu_si512(out + 48, _mm512_maskz_shuffle_i32x4(kAll16, t2, t3, kOdd));
  }
}

// count blocks as runs of kLanes by fn, the last partial run through a buffer.
template <int kLanes, class Fn>
void blocks_in_runs(Fn fn, uint32_t* words, uint64_t first, int64_t count,
                    const RngStream& rng) {
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) fn(words + 4 * i, first + uint64_t(i), rng);
  if (i < count) {
    uint32_t tail[4 * kLanes];
    fn(tail, first + uint64_t(i), rng);
    std::memcpy(words + 4 * i, tail, size_t(4 * (count - i)) * sizeof(uint32_t));
  }
}

#endif  // __x86_64__

}  // namespace

void philox_blocks(Isa isa, uint32_t* words, uint64_t first, int64_t count, const RngStream& rng) {
  MT_DCHECK(isa <= cpu_isa(), "philox_blocks: path ", isa_name(isa), " above the CPU's");
#if defined(__x86_64__)
  if (isa == Isa::kAvx512)
    return blocks_in_runs<16 * kChains>(blocks_avx512, words, first, count, rng);
  if (isa == Isa::kAvx2) return blocks_in_runs<8 * kChains>(blocks_avx2, words, first, count, rng);
#endif
  blocks_scalar(words, first, count, rng);
}

void philox_blocks(uint32_t* words, uint64_t first, int64_t count, const RngStream& rng) {
  philox_blocks(active_isa(), words, first, count, rng);
}

}  // namespace mt
