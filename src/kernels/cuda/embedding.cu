// Embedding lookup and its deterministic backward on the GPU, the function of
// embedding.cc for a table shard holding rows [row_start, row_start + rows).
//
// The CPU rejects a negative id before touching anything; here one block
// finds the first negative position (a fixed reduction), and the host reads it
// back (a synchronisation) and raises the CPU's error. Ids on the host are
// checked there and copied to the GPU.
//
// Backward is a scatter-add without atomics, in the CPU's order per table row:
// the positions are sorted by their shard row (CUB's radix sort, stable, so
// each row's positions stay in increasing order); every run of equal rows is a
// segment whose sum one block takes: 32 columns x 4 per thread, the segment's
// positions dealt to 8 row lanes (lane y takes positions y, y + 8, ...), then
// dtable += lane 0's sum + lane 1's + ... in order. A segment of at most 8
// positions is so added in the CPU's order (the same bits); a long one (a
// frequent token) is split over the lanes so its chain of adds is 8x shorter.
#include "kernels/cuda/embedding.h"

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <bit>
#include <climits>

#include "backend/cuda/cuda_check.h"
#include "backend/device.h"
#include "core/error.h"
#include "kernels/cuda/device_math.cuh"

namespace mt::cuda {

namespace {

constexpr int kThreads = 256;   // forward: threads of a row block
constexpr int kColTile = 32;    // backward: columns of a block's warp ...
constexpr int kColsPerThread = 4;  // ... each thread taking 4 (128 columns a block)
constexpr int kRowLanes = 8;    // backward: lanes over a segment's positions
constexpr int kRange = 32;      // backward: sorted positions scanned by a block

// Grow-only scratch (reused across calls): `bytes` of GPU memory.
char* grown(DeviceBuffer& buf, size_t bytes) {
  if (buf.size() < bytes) buf = DeviceBuffer(Device::kCuda, bytes);
  return buf.data();
}
size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// found[0] = the first position whose id is negative (n if none), found[1] its id.
// One block; each thread's first hit is its smallest, then a min over the block.
__global__ void first_negative_kernel(long long* found, const int32_t* ids, int64_t n) {
  __shared__ long long part[32];
  long long first = n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    if (ids[i] < 0) {
      first = i;
      break;
    }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) first = min(first, __shfl_xor_sync(0xffffffffu, first, o));
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = first;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < int(blockDim.x >> 5); ++w) first = min(first, part[w]);
    found[0] = first;
    found[1] = first < n ? ids[first] : 0;
  }
}

// The CPU's check_ids: the shape, then no negative id (the first one named).
// Returns ids on the GPU: the caller's, or a copy of host ids in `staged`.
const int32_t* checked_ids(const char* who, const int32_t* ids, int64_t n, int64_t h,
                           int64_t row_start, int64_t rows) {
  MT_CHECK(n >= 0 && h > 0 && row_start >= 0 && rows >= 0, who, ": bad shape n=", n, " h=", h,
           " row_start=", row_start, " rows=", rows);
  MT_CHECK(n <= INT_MAX && rows < INT32_MAX, who, " (cuda): n=", n, " rows=", rows,
           " above the GPU kernel's 2^31 - 1; fix: a smaller batch, or --device cpu");
  if (n == 0) return ids;
  if (!on_device(ids)) {  // host ids: the CPU's check as it is, then a GPU copy
    for (int64_t i = 0; i < n; ++i)
      MT_CHECK(ids[i] >= 0, who, ": token id ", ids[i], " at position ", i,
               " is negative; fix: check the tokenizer / dataset produced valid ids");
    static DeviceBuffer staged;
    auto* dst = reinterpret_cast<int32_t*>(grown(staged, size_t(n) * sizeof(int32_t)));
    copy_bytes(dst, ids, size_t(n) * sizeof(int32_t));
    return dst;
  }
  static DeviceBuffer flag;
  auto* found = reinterpret_cast<long long*>(grown(flag, 2 * sizeof(long long)));
  first_negative_kernel<<<1, 1024, 0, stream()>>>(found, ids, n);
  MT_CUDA_LAUNCH_CHECK();
  long long host[2] = {0, 0};
  copy_bytes(host, found, sizeof host);  // waits for the kernel
  const int64_t i = host[0];
  MT_CHECK(i >= n, who, ": token id ", int32_t(host[1]), " at position ", i,
           " is negative; fix: check the tokenizer / dataset produced valid ids");
  return ids;
}

// One block per position: out row = its table row (0 outside the shard), or += it.
template <class T>
__global__ void forward_kernel(float* out, const int32_t* ids, const T* table, int64_t h,
                               int64_t row_start, int64_t rows, bool accumulate) {
  const int64_t i = blockIdx.x;
  float* y = out + i * h;
  const int64_t r = int64_t(ids[i]) - row_start;
  const bool mine = r >= 0 && r < rows;
  if (!mine && accumulate) return;  // another shard's row adds zero
  const T* src = table + (mine ? r : 0) * h;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
    const float e = mine ? ld_f32(src, j) : 0.f;
    y[j] = accumulate ? y[j] + e : e;
  }
}

// keys[i] = the shard row of position i, or `rows` for another shard's; pos[i] = i.
__global__ void keys_kernel(uint32_t* keys, uint32_t* pos, const int32_t* ids, int64_t n,
                            int64_t row_start, int64_t rows) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int64_t r = int64_t(ids[i]) - row_start;
  keys[i] = uint32_t(r >= 0 && r < rows ? r : rows);
  pos[i] = uint32_t(i);
}

// end_of[k] = one past the last sorted position of row k (written by that
// position, the only one that knows it; read only for rows that occur).
__global__ void segment_end_kernel(uint32_t* end_of, const uint32_t* keys, int64_t n,
                                   uint32_t rows) {
  const int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= n) return;
  const uint32_t k = keys[p];
  if (k < rows && (p == n - 1 || keys[p + 1] != k)) end_of[k] = uint32_t(p + 1);
}

// Block (kColTile, kRowLanes): sorted positions [blockIdx.x * kRange, + kRange),
// columns blockIdx.y * 128 + x + 32 c. For each segment that starts there:
// dtable[row] += Σ dout[pos] over the segment, as the file comment says.
__global__ void backward_kernel(float* dtable, const float* dout, const uint32_t* keys,
                                const uint32_t* pos, const uint32_t* end_of, int64_t n,
                                int64_t h, uint32_t rows) {
  __shared__ uint32_t s_keys[kRange + 1];  // s_keys[q + 1] = keys[p0 + q]; [0] the one before
  __shared__ float part[kRowLanes][kColsPerThread][kColTile];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kColTile + tx;
  const int64_t p0 = int64_t(blockIdx.x) * kRange;
  const int len = int(min(int64_t(kRange), n - p0));
  const int64_t col0 = int64_t(blockIdx.y) * (kColTile * kColsPerThread) + tx;
  if (tid <= len) s_keys[tid] = (p0 + tid - 1 >= 0) ? keys[p0 + tid - 1] : 0xFFFFFFFFu;
  __syncthreads();
  for (int q = 0; q < len; ++q) {
    const uint32_t k = s_keys[q + 1];
    if (k >= rows || k == s_keys[q]) continue;  // not a segment's start (the same for the block)
    const int64_t end = end_of[k];
    float acc[kColsPerThread] = {};
    for (int64_t p = p0 + q + ty; p < end; p += kRowLanes) {
      const float* src = dout + int64_t(pos[p]) * h;
#pragma unroll
      for (int c = 0; c < kColsPerThread; ++c) {
        const int64_t col = col0 + c * kColTile;
        if (col < h) acc[c] += src[col];
      }
    }
#pragma unroll
    for (int c = 0; c < kColsPerThread; ++c) part[ty][c][tx] = acc[c];
    __syncthreads();
    if (ty < kColsPerThread) {  // warp ty adds the lanes of its columns, in lane order
      const int64_t col = col0 + ty * kColTile;
      if (col < h) {
        float* dst = dtable + int64_t(k) * h + col;
        float t = *dst;
#pragma unroll
        for (int l = 0; l < kRowLanes; ++l) t += part[l][ty][tx];
        *dst = t;
      }
    }
    __syncthreads();  // part is reused by the next segment
  }
}

}  // namespace

// out (n, h) = table[ids - row_start]   (or += when accumulate)
void embedding_forward(float* out, const int32_t* ids, ReadView table, int64_t n, int64_t h,
                       int64_t row_start, int64_t rows, bool accumulate) {
  const int32_t* d_ids = checked_ids("embedding_forward", ids, n, h, row_start, rows);
  MT_CHECK(bool(table), "embedding_forward: no table");
  if (n == 0) return;
  const int threads = h >= kThreads ? kThreads : int((h + 31) / 32 * 32);
  visit(table, [&](const auto* t) {
    forward_kernel<<<unsigned(n), threads, 0, stream()>>>(out, d_ids, t, h, row_start, rows,
                                                          accumulate);
  });
  MT_CUDA_LAUNCH_CHECK();
}

// dtable (rows, h) += scatter of dout by ids (deterministic: no atomics)
void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t n,
                        int64_t h, int64_t row_start, int64_t rows) {
  const int32_t* d_ids = checked_ids("embedding_backward", ids, n, h, row_start, rows);
  if (n == 0 || rows == 0) return;
  const int64_t col_tiles = (h + kColTile * kColsPerThread - 1) / (kColTile * kColsPerThread);
  MT_CHECK(col_tiles <= 65535, "embedding_backward (cuda): h=", h, " is above the GPU kernel's ",
           65535 * kColTile * kColsPerThread, "; fix: --device cpu");
  // Keys 0..rows (rows: another shard's position) need this many radix bits.
  const int end_bit = std::max(1, int(std::bit_width(uint32_t(rows))));
  const int items = int(n);
  size_t sort_bytes = 0;
  MT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, (const uint32_t*)nullptr,
                                                (uint32_t*)nullptr, (const uint32_t*)nullptr,
                                                (uint32_t*)nullptr, items, 0, end_bit, stream()));
  // Scratch: keys, sorted keys, positions, sorted positions (n each), end_of (rows), CUB's.
  const size_t list = align256(size_t(n) * sizeof(uint32_t));
  const size_t ends = align256(size_t(rows) * sizeof(uint32_t));
  static DeviceBuffer buf;
  char* base = grown(buf, 4 * list + ends + sort_bytes);
  auto* keys = reinterpret_cast<uint32_t*>(base);
  auto* keys_sorted = reinterpret_cast<uint32_t*>(base + list);
  auto* pos = reinterpret_cast<uint32_t*>(base + 2 * list);
  auto* pos_sorted = reinterpret_cast<uint32_t*>(base + 3 * list);
  auto* end_of = reinterpret_cast<uint32_t*>(base + 4 * list);
  void* sort_tmp = base + 4 * list + ends;

  keys_kernel<<<blocks_for(n, 256), 256, 0, stream()>>>(keys, pos, d_ids, n, row_start, rows);
  MT_CUDA_LAUNCH_CHECK();
  MT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_tmp, sort_bytes, keys, keys_sorted, pos,
                                                pos_sorted, items, 0, end_bit, stream()));
  segment_end_kernel<<<blocks_for(n, 256), 256, 0, stream()>>>(end_of, keys_sorted, n,
                                                               uint32_t(rows));
  MT_CUDA_LAUNCH_CHECK();
  const dim3 grid{blocks_for(n, kRange), unsigned(col_tiles)}, block{kColTile, kRowLanes};
  backward_kernel<<<grid, block, 0, stream()>>>(dtable, dout, keys_sorted, pos_sorted, end_of, n,
                                                h, uint32_t(rows));
  MT_CUDA_LAUNCH_CHECK();
}

}  // namespace mt::cuda
