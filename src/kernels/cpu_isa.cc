// CPU feature detection (CPUID and the OS's XCR0) and the kernels' path choice
// (see cpu_isa.h).
#include "kernels/cpu_isa.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "core/error.h"

namespace mt {
namespace {

struct CpuFeatures {
  bool avx2_fma = false;     // AVX2 and FMA, and the OS saves the YMM state
  bool avx512 = false;       // F, BW, DQ, VL, and the OS saves the ZMM state
  bool avx512_bf16 = false;  // and AVX512-BF16
  bool amx_bf16 = false;     // AMX-BF16, and the OS saves the tile state
};

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool fma = (ecx >> 12) & 1u;
  if (!((ecx >> 27) & 1u)) return f;  // OSXSAVE: xgetbv is usable
  unsigned xcr0 = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0), "=d"(xcr0_hi) : "c"(0));
  const unsigned kYmmState = (1u << 1) | (1u << 2);                     // SSE, AVX
  const unsigned kZmmState = kYmmState | (1u << 5) | (1u << 6) | (1u << 7);  // + opmask, ZMM
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return f;
  const unsigned max_sub = eax;
  const bool avx2 = (ebx >> 5) & 1u;
  const bool f512 = (ebx >> 16) & 1u, dq = (ebx >> 17) & 1u, bw = (ebx >> 30) & 1u,
             vl = (ebx >> 31) & 1u;
  f.avx2_fma = avx2 && fma && (xcr0 & kYmmState) == kYmmState;
  f.avx512 = f.avx2_fma && f512 && dq && bw && vl && (xcr0 & kZmmState) == kZmmState;
  const unsigned kTileState = (1u << 17) | (1u << 18);
  f.amx_bf16 = ((edx >> 22) & 1u) && (xcr0 & kTileState) == kTileState;
  if (f.avx512 && max_sub >= 1 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx))
    f.avx512_bf16 = (eax >> 5) & 1u;
#endif
  return f;
}

const CpuFeatures& features() {
  static const CpuFeatures f = detect();
  return f;
}

// The chosen path, or kUnset before the first active_isa().
constexpr uint8_t kUnset = 0xFF;
std::atomic<uint8_t> g_choice{kUnset};

Isa lowered(Isa want) {
  const Isa best = cpu_isa();
  if (want <= best) return want;
  std::fprintf(stderr, "megatron: MT_ISA=%s is more than this CPU has; using %s\n",
               isa_name(want), isa_name(best));
  return best;
}

Isa from_environment() {
  const char* env = std::getenv("MT_ISA");
  if (env == nullptr || *env == '\0') return cpu_isa();
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512})
    if (std::strcmp(env, isa_name(isa)) == 0) return lowered(isa);
  MT_FAIL("MT_ISA=", env, " is not a known instruction set; fix: scalar, avx2 or avx512",
           " (or unset it for the CPU's best)");
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

Isa cpu_isa() {
  const CpuFeatures& f = features();
  return f.avx512 ? Isa::kAvx512 : f.avx2_fma ? Isa::kAvx2 : Isa::kScalar;
}

bool cpu_has_avx512_bf16() { return features().avx512_bf16; }

bool cpu_has_amx_bf16() { return features().amx_bf16; }

Isa active_isa() {
  uint8_t c = g_choice.load(std::memory_order_relaxed);
  if (c == kUnset) {  // first call: racing threads compute the same value
    c = uint8_t(from_environment());
    g_choice.store(c, std::memory_order_relaxed);
  }
  return Isa(c);
}

Isa set_isa_for_testing(Isa isa) {
  const Isa previous = active_isa();
  g_choice.store(uint8_t(lowered(isa)), std::memory_order_relaxed);
  return previous;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512})
    if (isa <= cpu_isa()) out.push_back(isa);
  return out;
}

}  // namespace mt
