// The bf16 sum as an MPI reduction: Megatron-LM's --grad-reduce-in-bf16 moves
// bf16 gradients over the data-parallel group, half the bytes of fp32.
//
// MPI has no bf16 type, so bf16 values travel as MPI_UINT16_T (the upper 16
// bits of an IEEE float, as in kernels/precision.h) and are summed by a
// user-defined, commutative MPI_Op: each pairwise sum widens both operands to
// fp32 (exact), adds them in fp32 (exact unless their exponents are more than
// 16 apart) and rounds the result once to bf16 (nearest, ties to even). A
// reduction over N ranks therefore rounds N − 1 times, in whatever tree MPI
// chooses; over 2 ranks the result is exactly bf16(a + b).
#pragma once
#include <mpi.h>

#include <cstdint>

namespace mt {

// inout[i] = bf16(f32(inout[i]) + f32(in[i])) for i < n (`=`).
// in, inout: (n) bf16. They may be the same array, not partly overlap.
void bf16_sum_into(uint16_t* inout, const uint16_t* in, int64_t n);

// The MPI_Op of bf16_sum_into over MPI_UINT16_T (commutative). Created on
// the first call (MPI must be initialised; from the MPI thread) and kept for
// the process: MPI_Finalize releases it.
MPI_Op bf16_sum_op();

}  // namespace mt
