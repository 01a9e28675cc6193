// fp32 gradients to bf16 and back, in place in the gradient buffer, for
// --grad-reduce-in-bf16 (Megatron-LM's flag): a DP bucket's fp32 gradients
// are rounded to bf16 into the first half of the bucket's own bytes, reduced
// in bf16 (half the bytes on the wire), and widened back to fp32 where the
// optimizer reads them. No buffer of the gradients' size, no scratch.
//
// Layout, for a bucket of n floats at x: bf16 element i lives at byte 2i of
// x (read it as reinterpret_cast<uint16_t*>(x)[i]), fp32 element i at byte
// 4i. Rounding goes forwards (element i's write at 2i never reaches an
// element not yet read, at 4j > 2i); widening goes backwards (element i's
// write at 4i only reaches bf16 elements j >= 2i, already read). Both run on
// OpenMP threads in rounds that never let one thread's writes meet another's
// reads: rounding doubles the done prefix [0, s) by converting [s, 2s) (reads
// at [4s, 8s), writes at [2s, 4s)), widening halves the to-do range [b, e)
// by converting [e/2, e) (reads at [e, 2e), writes at [2e, 4e)); the lowest
// 32K elements (the first round of rounding, the last of widening) run on
// one thread. Each thread moves its elements through small local blocks with
// memcpy, so the two views of the same bytes never meet as typed loads and
// stores the compiler could reorder. Measured in bench/README.md (bf16
// section): ~20-40 GB/s on one thread, 1.7x that on two idle cores.
#pragma once
#include <cstdint>

namespace mt {

// x[0..n) fp32 → bf16 at reinterpret_cast<uint16_t*>(x)[0..n), rounded to
// nearest even (bf16_from_f32: NaN stays NaN, overflow becomes ±inf).
// Returns that bf16 array. Bytes [2n, 4n) of x are left as they were.
uint16_t* round_to_bf16_in_place(float* x, int64_t n);

// The bf16 elements [begin, end) of reinterpret_cast<uint16_t*>(x), widened
// to fp32 and multiplied by `scale`, into x[begin..end) (`=`); the bf16
// bytes [2·begin, 2·end) are overwritten. Elements outside [begin, end) are
// not touched in either view except where their bytes overlap these.
void widen_bf16_in_place(float* x, int64_t begin, int64_t end, float scale = 1.f);

}  // namespace mt
