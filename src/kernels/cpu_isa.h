// Which vector instructions the hand-vectorised CPU kernels use, chosen at run
// time so that one build runs on an AVX2-only CPU (AMD EPYC before Zen 4), an
// AVX-512 one (Xeon, Zen 4/5) and, through the plain C++ paths, anything else.
//
// A kernel with instruction-set paths compiles each path as its own function
// (`__attribute__((target(...)))`, whatever the build's -march) and picks one
// per call by active_isa(). Paths give equal numbers: bit for bit where the
// math is integer (Philox dropout masks), to round-off elsewhere.
//
// The loops written for the compiler's vectoriser (`#pragma omp simd`) have
// no paths: they are compiled once, for the build's -march.
#pragma once
#include <cstdint>
#include <vector>

namespace mt {

// A path's functions: compiled for its instruction set whatever the build's
// -march, called only when active_isa() allows.
#define MT_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define MT_TARGET_AVX512 \
  __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl")))

// Ordered: a CPU that runs a path runs every path before it.
enum class Isa : uint8_t {
  kScalar,  // plain C++ (the compiler may still vectorise it for -march)
  kAvx2,    // AVX2 + FMA, 8 floats a register
  kAvx512,  // AVX-512 F, BW, DQ and VL, 16 floats a register
};

// "scalar", "avx2", "avx512"
const char* isa_name(Isa isa);

// The widest path this CPU and its OS (saved register state) can run.
Isa cpu_isa();

// True if the CPU has AVX512-BF16 (VDPBF16PS) and the OS saves the AVX-512
// state.
bool cpu_has_avx512_bf16();
// True if the CPU has AMX-BF16 and the OS saves the tile state.
bool cpu_has_amx_bf16();

// The path the kernels take: cpu_isa(), or less if the environment variable
// MT_ISA=scalar|avx2|avx512 (read once, at the first call) asks for less; a
// request above cpu_isa() is lowered to it, with a warning. A process-wide
// choice like the CPU itself: the one piece of global state of the kernels.
Isa active_isa();

// Tests and benchmarks: run the kernels on `isa` (lowered to cpu_isa());
// returns the previous choice, to restore. Not for use while kernels run.
Isa set_isa_for_testing(Isa isa);

// Every path this CPU can run, narrowest first: scalar, AVX2 (on every CPU we
// run on) and AVX-512 where present. Tests run each.
std::vector<Isa> supported_isas();

}  // namespace mt
