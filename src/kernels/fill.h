// Fills of whole parameter and gradient buffers.
#pragma once
#include <cstdint>
#include <functional>

#include "core/rng.h"

namespace mt {

// x (n) = 0 [=], on the device x lives on. On the CPU every OpenMP thread
// zeroes its slice with streaming stores (AVX-512 or AVX2; std::fill on the
// scalar path): for a buffer far larger
// than the caches that the next pass reads anyway (the gradient buffer),
// writing around the caches saves reading every line in first.
void zero_streaming(float* x, int64_t n);

// dst (rows, cols) [=]: element (r, c) = std · N(0, 1) drawn from `rng` at
// index row_first_index(r) + c (a shard's rows draw their global elements'
// numbers). Host memory; OpenMP over rows.
void fill_normal(float* dst, int64_t rows, int64_t cols, float std, const RngStream& rng,
                 const std::function<uint64_t(int64_t)>& row_first_index);

}  // namespace mt
