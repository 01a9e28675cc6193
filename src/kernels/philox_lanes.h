// Philox4x32-10 blocks (core/rng.h) drawn in the lanes of vector registers:
// 16 blocks at a time with AVX-512, 8 with AVX2, one by one on the scalar
// path. Philox is integer math (32 x 32 -> 64-bit products, xor, add), so
// every path gives RngStream::block's words bit for bit, and a dropout mask
// does not depend on the CPU a run is on.
#pragma once
#include <cstdint>

#include "core/rng.h"
#include "kernels/cpu_isa.h"

namespace mt {

// words (4 count) [=]: words[4i + w] = rng.block(first + i).v[w] for
// i < count, on the active path (active_isa()).
void philox_blocks(uint32_t* words, uint64_t first, int64_t count, const RngStream& rng);

// The same on path `isa` (at most cpu_isa()): for tests and benchmarks.
void philox_blocks(Isa isa, uint32_t* words, uint64_t first, int64_t count, const RngStream& rng);

}  // namespace mt
