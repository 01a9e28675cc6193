#include "kernels/precision.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "core/rng.h"

namespace mt {
namespace precision_test {

uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }
float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

// Scalar reference of bf16 rounding, by comparing distances in double: the two
// candidates are x truncated toward zero and the next bf16 away from zero;
// nearest wins, a tie goes to the even mantissa, 2^128 means inf.
uint16_t ref_bf16(float x) {
  if (std::isnan(x)) return uint16_t((bits(x) >> 16) | 0x40);  // any quiet NaN would do
  if (std::isinf(x)) return uint16_t(bits(x) >> 16);
  const uint32_t lo = bits(x) & 0xFFFF0000u, hi = lo + 0x10000u;
  const double vx = std::fabs(double(x));
  const double vlo = std::fabs(double(from_bits(lo)));
  const double vhi = (hi & 0x7FFFFFFFu) == 0x7F800000u ? std::ldexp(1.0, 128)
                                                        : std::fabs(double(from_bits(hi)));
  const double dlo = vx - vlo, dhi = vhi - vx;
  if (dlo < dhi || (dlo == dhi && ((lo >> 16) & 1u) == 0)) return uint16_t(lo >> 16);
  return uint16_t(hi >> 16);
}

// Every non-negative fp16 value as a double, indexed by its bit pattern
// (0 .. 0x7BFF finite, then 0x7C00 = 65536 standing in for +inf).
const std::vector<double>& f16_table() {
  static const std::vector<double> table = [] {
    std::vector<double> t;
    for (uint32_t h = 0; h <= 0x7C00u; ++h) {
      const int e = int(h >> 10), m = int(h & 0x3FFu);
      t.push_back(e == 0 ? std::ldexp(double(m), -24) : std::ldexp(double(1024 + m), e - 25));
    }
    return t;
  }();
  return table;
}

// Scalar reference of fp16 rounding: nearest entry of the table, ties to the
// even bit pattern; 65536 (the entry of inf) becomes inf.
float ref_f16(float x) {
  if (std::isnan(x) || std::isinf(x)) return x;
  const std::vector<double>& t = f16_table();
  const double ax = std::fabs(double(x));
  double r;
  if (ax >= t.back()) {
    r = std::numeric_limits<double>::infinity();
  } else {
    const size_t i = size_t(std::upper_bound(t.begin(), t.end(), ax) - t.begin());  // t[i-1] <= ax
    const double dlo = ax - t[i - 1], dhi = t[i] - ax;
    const size_t pick = (dlo < dhi || (dlo == dhi && (i - 1) % 2 == 0)) ? i - 1 : i;
    r = pick == 0x7C00u ? std::numeric_limits<double>::infinity() : t[pick];
  }
  return float(std::copysign(r, double(x)));
}

// Values across every exponent of fp32 (random bit patterns), the fp16 range
// in detail, and ties (midpoints) of both formats.
std::vector<float> test_values() {
  std::vector<float> v;
  const RngStream rng = RngStream::make(5, "precision_values");
  for (uint64_t i = 0; i < 200000; ++i) {
    const uint32_t u = rng.block(i).v[0];
    v.push_back(from_bits(u));                                              // anything
    v.push_back(from_bits((u & 0x807FFFFFu) | ((96u + (u >> 24) % 62u) << 23)));  // 2^-31..2^30
  }
  for (uint32_t h = 0; h < 0x7C00u; ++h) {  // fp16 midpoints (up to 65520) and neighbours
    const float mid = float((f16_table()[h] + f16_table()[h + 1]) / 2);  // exact in fp32
    for (float x : {mid, std::nextafter(mid, 0.f), std::nextafter(mid, 1e9f)}) {
      v.push_back(x);
      v.push_back(-x);
    }
  }
  for (uint32_t b = 0; b < 0x10000u; b += 7) {  // bf16 ties: half-way bit pattern
    v.push_back(from_bits((b << 16) | 0x8000u));
    v.push_back(from_bits((b << 16) | 0x7FFFu));
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.f, -0.f, inf, -inf, std::nanf(""), -std::nanf(""), from_bits(0x7F800001u),
                  from_bits(0xFF800001u), 65504.f, 65519.996f, 65520.f, 65536.f, 1e30f,
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::min(), 0x1p-24f, 0x1p-25f, 0x3p-25f, 0x1p-14f})
    v.push_back(x);
  return v;
}

TEST(Precision, MathModeNames) {
  EXPECT_STREQ(math_mode_name(MathMode::kF32), "fp32");
  EXPECT_STREQ(math_mode_name(MathMode::kBF16), "bf16");
  EXPECT_STREQ(math_mode_name(MathMode::kF16), "fp16");
}

TEST(Precision, Bf16MatchesScalarReference) {
  const std::vector<float> x = test_values();  // > 2^15 elements: the OpenMP path
  std::vector<uint16_t> got(x.size());
  f32_to_bf16(got.data(), x.data(), int64_t(x.size()));
  int bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const uint16_t want = ref_bf16(x[i]);
    const bool ok = std::isnan(x[i]) ? std::isnan(f32_from_bf16(got[i])) &&
                                           (got[i] & 0x8000u) == (want & 0x8000u)
                                     : got[i] == want;
    if (!ok && bad++ < 5)
      ADD_FAILURE() << "bf16 of " << x[i] << " (0x" << std::hex << bits(x[i]) << ") = 0x"
                    << got[i] << ", expected 0x" << want;
  }
  EXPECT_EQ(bad, 0);
}

TEST(Precision, Bf16EdgeCases) {
  auto bf = [](float x) { return bf16_from_f32(x); };
  EXPECT_EQ(bf(1.f), 0x3F80u);
  EXPECT_EQ(bf(from_bits(0x3F808000u)), 0x3F80u);  // tie, even below: down
  EXPECT_EQ(bf(from_bits(0x3F818000u)), 0x3F82u);  // tie, odd below: up
  EXPECT_EQ(bf(from_bits(0x3F808001u)), 0x3F81u);  // just above the tie: up
  EXPECT_EQ(bf(from_bits(0xBF818000u)), 0xBF82u);  // negative tie: magnitude up
  EXPECT_EQ(bf(std::numeric_limits<float>::max()), 0x7F80u);  // rounds past the range: inf
  EXPECT_EQ(bf(-std::numeric_limits<float>::infinity()), 0xFF80u);
  EXPECT_EQ(bf(-0.f), 0x8000u);
  EXPECT_EQ(bf(from_bits(0x00018000u)), 0x0002u);  // fp32 subnormals round too
  // NaN with its payload only in the low 16 bits must not become inf.
  EXPECT_TRUE(std::isnan(f32_from_bf16(bf(from_bits(0x7F800001u)))));
  EXPECT_TRUE(std::isnan(f32_from_bf16(bf(from_bits(0xFF800001u)))));
  EXPECT_EQ(bf(from_bits(0xFFC00000u)), 0xFFC0u);
}

TEST(Precision, Bf16RoundTripOfEveryPattern) {
  std::vector<uint16_t> all(0x10000), back(0x10000);
  for (uint32_t i = 0; i < 0x10000u; ++i) all[i] = uint16_t(i);
  std::vector<float> wide(0x10000);
  bf16_to_f32(wide.data(), all.data(), 0x10000);
  f32_to_bf16(back.data(), wide.data(), 0x10000);
  for (uint32_t i = 0; i < 0x10000u; ++i) {
    ASSERT_EQ(bits(wide[i]), i << 16) << i;  // widening is exact
    if (std::isnan(wide[i]))
      ASSERT_TRUE(std::isnan(f32_from_bf16(back[i]))) << i;
    else
      ASSERT_EQ(back[i], all[i]) << i;
  }
}

TEST(Precision, F16MatchesScalarReference) {
  const std::vector<float> x = test_values();
  std::vector<float> got(x.size());
  round_to_f16(got.data(), x.data(), int64_t(x.size()));
  int bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = ref_f16(x[i]);
    const bool ok = std::isnan(x[i]) ? std::isnan(got[i]) : bits(got[i]) == bits(want);
    if (!ok && bad++ < 5)
      ADD_FAILURE() << "fp16 of " << x[i] << " (0x" << std::hex << bits(x[i]) << ") = " << got[i]
                    << ", expected " << want;
  }
  EXPECT_EQ(bad, 0);
  // In place gives the same.
  std::vector<float> inplace = x;
  round_to_f16(inplace.data(), inplace.data(), int64_t(inplace.size()));
  for (size_t i = 0; i < x.size(); ++i)
    if (!std::isnan(x[i])) {
      ASSERT_EQ(bits(inplace[i]), bits(got[i])) << i;
    }
}

TEST(Precision, F16EdgeCases) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f16_round(65504.f), 65504.f);                    // largest fp16
  EXPECT_EQ(f16_round(std::nextafter(65520.f, 0.f)), 65504.f);
  EXPECT_EQ(f16_round(65520.f), inf);                        // tie with 2^16: to inf (even)
  EXPECT_EQ(f16_round(-65520.f), -inf);
  EXPECT_EQ(f16_round(1e30f), inf);
  EXPECT_EQ(f16_round(-inf), -inf);
  EXPECT_TRUE(std::isnan(f16_round(std::nanf(""))));
  EXPECT_TRUE(std::isnan(f16_round(from_bits(0x7F800001u))));
  EXPECT_EQ(f16_round(0x1p-24f), 0x1p-24f);                  // smallest subnormal kept
  EXPECT_EQ(bits(f16_round(0x1p-25f)), bits(0.f));           // tie: to even (0)
  EXPECT_EQ(bits(f16_round(-0x1p-25f)), bits(-0.f));
  EXPECT_EQ(f16_round(0x1.8p-25f), 0x1p-24f);                 // 0.75 ulp: up
  EXPECT_EQ(f16_round(0x3p-25f), 0x1p-23f);                  // tie between 1 and 2 ulps: 2
  EXPECT_EQ(f16_round(0x1p-14f - 0x1p-26f), 0x1p-14f);       // top subnormal rounds to normal
  EXPECT_EQ(f16_round(1.f + 0x1p-11f), 1.f);                 // tie: even
  EXPECT_EQ(f16_round(1.f + 0x3p-11f), 1.f + 0x1p-9f);       // tie: even (up)
  EXPECT_EQ(f16_round(0.1f), 0x1.998p-4f);                   // 0.0999755859375
}

TEST(Precision, CpuFeatureMatchesProcCpuinfo) {
  std::ifstream f("/proc/cpuinfo");
  ASSERT_TRUE(f.good()) << "cannot read /proc/cpuinfo";
  std::string line;
  bool flags_seen = false, listed = false;
  while (std::getline(f, line))
    if (line.rfind("flags", 0) == 0) {
      flags_seen = true;
      line += ' ';
      listed = line.find(" avx512_bf16 ") != std::string::npos ||
               line.find(" amx_bf16 ") != std::string::npos;
      break;
    }
  ASSERT_TRUE(flags_seen) << "no flags line in /proc/cpuinfo";
  EXPECT_EQ(cpu_has_native_bf16(), listed);
}

TEST(Precision, ParamRefViewsEitherStorage) {
  std::vector<float> w = {1.5f, -2.25f, 3.0f, 0.1f};
  std::vector<uint16_t> w16(w.size());
  f32_to_bf16(w16.data(), w.data(), int64_t(w.size()));
  EXPECT_FALSE(bool(ReadView()));
  EXPECT_FALSE(bool(ReadView(nullptr)));
  EXPECT_FALSE(bool(ReadView().at(2)));  // an absent parameter stays absent
  const ReadView f(w.data()), h(w16.data());
  EXPECT_TRUE(bool(f) && bool(h));
  EXPECT_EQ(f.at(2).f32, w.data() + 2);
  EXPECT_EQ(h.at(2).bf16, w16.data() + 2);
  EXPECT_EQ(h.at(2).f32, nullptr);
  EXPECT_TRUE(f.at(1) == ReadView(w.data() + 1));
  EXPECT_FALSE(f == h);
  std::vector<float> out(w.size());
  convert(out.data(), f, int64_t(w.size()));
  EXPECT_EQ(out, w);
  convert(out.data(), h, int64_t(w.size()));
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(out[i], f32_from_bf16(w16[i])) << i;
    EXPECT_EQ(load_f32(w16.data(), int64_t(i)), out[i]) << i;
  }
  EXPECT_NE(out[3], w[3]);  // 0.1 is not a bf16 value: the bf16 view is read
  const Compute cm;
  EXPECT_EQ(cm.math, MathMode::kF32);
}

TEST(Precision, ConversionsRejectNegativeSizes) {
  std::vector<float> x(4);
  std::vector<uint16_t> h(4);
  EXPECT_ANY_THROW(f32_to_bf16(h.data(), x.data(), -1));
  EXPECT_ANY_THROW(bf16_to_f32(x.data(), nullptr, 4));
  EXPECT_ANY_THROW(round_to_f16(nullptr, x.data(), 4));
  f32_to_bf16(nullptr, nullptr, 0);  // empty is fine
}

}  // namespace precision_test
}  // namespace mt
