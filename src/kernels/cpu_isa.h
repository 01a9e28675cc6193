// Which vector instructions the hand-vectorised CPU kernels use, chosen at run
// time so that one build runs on an AVX2-only CPU (AMD EPYC before Zen 4), an
// AVX-512 one (Xeon, Zen 4/5) and, through the plain C++ paths, anything else.
//
// A kernel with instruction-set paths compiles each path as its own function
// (`__attribute__((target(...)))`, whatever the build's -march) and picks one
// per call by active_isa(). Paths give equal numbers: bit for bit where the
// math is integer (Philox dropout masks), to round-off elsewhere.
//
// The loops written for the compiler's vectoriser (`#pragma omp simd`) get
// their paths from on_isa / for_slices_on_isa below (the body compiled once
// per instruction set); those not wrapped so are compiled once, for the
// build's -march.
#pragma once
#include <omp.h>

#include <cstdint>
#include <vector>

namespace mt {

// A path's functions: compiled for its instruction set whatever the build's
// -march, called only when active_isa() allows.
#define MT_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define MT_TARGET_AVX512 \
  __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl")))
// The element-wise kernels' AVX-512 path (for_slices_on_isa) with 512-bit
// registers: GCC tunes AVX-512 Xeons (and -march=native there) to 256-bit
// ones, which left that path as wide as the AVX2 one. Element-wise results do
// not depend on the width (bit for bit); kernels with sums (norms,
// cross-entropy) keep 256-bit registers and so their rounding: changing it
// moves GoldenQwen2's five AdamW steps past its 1e-5 bar (the k bias's
// gradient is round-off that AdamW normalises). Config (a)'s GELU, 1 thread,
// in cache (bench_cpu_paths): forward 1.33x, backward 1.35x faster.
#define MT_TARGET_AVX512_WIDE \
  __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl,prefer-vector-width=512")))

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

// body() compiled for path `isa`, for the kernels written as plain loops for
// the compiler's vectoriser (`#pragma omp simd`): the lambda is inlined into
// one wrapper per instruction set (flatten; the wrappers themselves are never
// inlined, which a native AVX-512 build would allow), whose loops are then
// vectorised for that set, so one source gives every path. Reductions' order follows
// the register width (paths agree to round-off). Put it inside an OpenMP
// region, around a row's or a chunk's work, never around a region: a
// region's body is compiled as a function of its own, for the build's -march.
// The scalar path is the build's own code (-march=native: as wide as the CPU;
// with MT_ARCH=x86-64-v3, AVX2). Capture by value ([=]) and the body travels
// by value: its copy is the wrapper's own, so the compiler keeps the captured
// scalars in registers; by reference, a store to an output float might alias
// a captured float, which is reloaded every element, and loops such as
// AdamW's stay scalar. (So capture pointers and numbers, never a container:
// each row would copy it.)
template <class Body>
MT_TARGET_AVX512 __attribute__((flatten, noinline)) void on_avx512(Body body) {
  body();
}
template <class Body>
MT_TARGET_AVX512_WIDE __attribute__((flatten, noinline)) void on_avx512_wide(Body body) {
  body();
}
template <class Body>
MT_TARGET_AVX2 __attribute__((flatten, noinline)) void on_avx2(Body body) {
  body();
}
template <class Body>
void on_isa(Isa isa, Body body) {
  if (isa == Isa::kAvx512)
    on_avx512(body);
  else if (isa == Isa::kAvx2)
    on_avx2(body);
  else
    body();
}

// body(t, nt) on each of the nt OpenMP threads of one parallel region (t its
// number), on the active path (on_isa; AVX-512 with 512-bit registers,
// on_avx512_wide): for element-wise kernels only, whose `omp simd` loops are
// body's. On the calling thread alone (t 0 of 1) when `parallel` is false.
template <class Body>
void on_threads_on_isa(Body body, bool parallel = true) {
  const Isa isa = active_isa();
#pragma omp parallel if (parallel)
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    if (isa == Isa::kAvx512)
      on_avx512_wide([=] { body(t, nt); });
    else
      on_isa(isa, [=] { body(t, nt); });
  }
}

// body(begin, end) over [0, n) cut into one contiguous slice per OpenMP
// thread (as `omp parallel for schedule(static)`), each slice on the active
// path (on_threads_on_isa). On the calling thread alone below `parallel_min`
// elements.
template <class Body>
void for_slices_on_isa(int64_t n, Body body, int64_t parallel_min = 0) {
  on_threads_on_isa([=](int64_t t, int64_t nt) { body(n * t / nt, n * (t + 1) / nt); },
                    n >= parallel_min);
}

// Every path this CPU can run, narrowest first: scalar, AVX2 (on every CPU we
// run on) and AVX-512 where present. Tests run each.
std::vector<Isa> supported_isas();

}  // namespace mt
