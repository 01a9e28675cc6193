// What LayerNorm's and RMSNorm's CUDA twins share: the row block's size and
// the two-pass, deterministic weight gradient (column partials of fixed row
// chunks into a grow-only scratch, then a fixed-order finish).
#pragma once
#include <algorithm>
#include <cstdint>

#include "backend/device.h"

namespace mt::cuda::norm {

inline constexpr int kColTile = 32;      // columns of a parameter-gradient block (one warp's width)
inline constexpr int kRowLanes = 8;      // row lanes of that block (256 threads)
inline constexpr int kFinishLanes = 16;  // chunk lanes of a finishing block (512 threads)

// Threads of a row block: few enough that every thread has several columns.
inline int row_threads(int64_t c) { return c <= 1024 ? 128 : c <= 4096 ? 256 : 512; }

// Rows per chunk of the parameter-gradient pass: a multiple of kRowLanes, at
// least 64, and at most ~256 chunks (the second pass walks them serially).
// Depends on n only, so the summation order is fixed for a shape.
inline int64_t rows_per_chunk(int64_t n) {
  const int64_t per = (n + 255) / 256;
  return std::max<int64_t>(64, (per + kRowLanes - 1) / kRowLanes * kRowLanes);
}

// Grow-only scratch of the column partials (reused across calls and norms).
inline float* partial_scratch(int64_t floats) {
  static DeviceBuffer buf;
  const size_t bytes = size_t(floats) * sizeof(float);
  if (buf.size() < bytes) buf = DeviceBuffer(Device::kCuda, bytes);
  return buf.as<float>();
}

}  // namespace mt::cuda::norm
