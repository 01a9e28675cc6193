// RoPE on the GPU: rope.cc's rotation of the first rot_dim features of each
// head vector, y1 = x1 cos - x2 sin', y2 = x2 cos + x1 sin' (sin' = -sin for
// the inverse), one thread per (head vector, frequency) pair.
//
// The table lives on the host (make_rope_table); the GPU reads a device copy
// of its cos/sin, uploaded the first time a table is used and then found by
// the table's address, its vectors' addresses and sizes, and a few sampled
// values (so a new table built where an old one lay is not mistaken for it).
// A handful of tables per process are kept (a model has one).
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/device.h"
#include "kernels/cuda/rope.h"

namespace mt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kProbes = 16;       // sampled values compared on each lookup
constexpr size_t kMaxTables = 8;  // device copies kept

struct CachedTable {
  const RopeTable* owner = nullptr;
  const float* cos_host = nullptr;
  const float* sin_host = nullptr;
  int64_t max_pos = 0, rot_dim = 0;
  float probe[2 * kProbes] = {};
  DeviceBuffer buf;  // cos (max_pos, rot_dim / 2), then sin (same shape)
};

void sample(const RopeTable& t, float* probe) {
  const size_t n = t.cos.size();  // > 0 (checked by rope.cc)
  for (int k = 0; k < kProbes; ++k) {
    const size_t i = (n - 1) * size_t(k) / size_t(kProbes - 1);
    probe[k] = t.cos[i];
    probe[kProbes + k] = t.sin[i];
  }
}

// Device cos (and sin = cos + max_pos * half) of t; uploads t on first use.
// The cache is never destroyed (process lifetime): its buffers must not
// outlive the backend's allocation registry at exit.
const float* device_table(const RopeTable& t) {
  static std::mutex mu;
  static auto* cache = new std::vector<std::unique_ptr<CachedTable>>();
  float probe[2 * kProbes];
  sample(t, probe);
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& c : *cache)
    if (c->owner == &t && c->cos_host == t.cos.data() && c->sin_host == t.sin.data() &&
        c->max_pos == t.max_pos && c->rot_dim == t.rot_dim &&
        std::memcmp(c->probe, probe, sizeof probe) == 0)
      return c->buf.as<float>();
  if (cache->size() >= kMaxTables) cache->erase(cache->begin());  // the oldest
  auto c = std::make_unique<CachedTable>();
  c->owner = &t;
  c->cos_host = t.cos.data();
  c->sin_host = t.sin.data();
  c->max_pos = t.max_pos;
  c->rot_dim = t.rot_dim;
  std::memcpy(c->probe, probe, sizeof probe);
  const size_t bytes = t.cos.size() * sizeof(float);
  c->buf = DeviceBuffer(Device::kCuda, 2 * bytes);
  copy_bytes(c->buf.data(), t.cos.data(), bytes);
  copy_bytes(c->buf.data() + bytes, t.sin.data(), bytes);
  cache->push_back(std::move(c));
  return cache->back()->buf.as<float>();
}

// x (rows = b a s, d); pair k = (row r, frequency i). cs, sn: (max_pos, half).
__global__ void rope_kernel(float* x, const float* cs, const float* sn, int64_t pairs, int64_t half,
                            int64_t s, int64_t d, int64_t pos0, float sign) {
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= pairs) return;
  const int64_t r = k / half, i = k % half;
  const int64_t pos = pos0 + r % s;
  float* x1 = x + r * d;
  float* x2 = x1 + half;
  const float u = x1[i], v = x2[i], c = cs[pos * half + i], si = sign * sn[pos * half + i];
  x1[i] = u * c - v * si;
  x2[i] = v * c + u * si;
}

void rotate(float* x, int64_t b, int64_t a, int64_t s, int64_t d, const RopeTable& t, int64_t pos0,
            float sign) {
  const int64_t half = t.rot_dim / 2, pairs = b * a * s * half;
  if (pairs <= 0) return;
  const float* cs = device_table(t);
  const float* sn = cs + t.max_pos * half;
  rope_kernel<<<blocks_for(pairs, kThreads), kThreads, 0, stream()>>>(x, cs, sn, pairs, half, s, d,
                                                                      pos0, sign);
  MT_CUDA_LAUNCH_CHECK();
}

}  // namespace

// x (b, a, s, d) =, in place   (shapes and table checked by rope.cc)
void rope_forward(float* x, int64_t b, int64_t a, int64_t s, int64_t d, const RopeTable& t,
                  int64_t pos0) {
  rotate(x, b, a, s, d, t, pos0, 1.f);
}

// dx (b, a, s, d) =, in place
void rope_backward(float* dx, int64_t b, int64_t a, int64_t s, int64_t d, const RopeTable& t,
                   int64_t pos0) {
  rotate(dx, b, a, s, d, t, pos0, -1.f);
}

}  // namespace mt::cuda
