// Helpers of the CUDA twin tests: each test runs a kernel's entry point on
// host buffers (its CPU code) and on GPU buffers (its CUDA twin) with the same
// random inputs and compares. Without a GPU every test reports that it needs
// one and is counted as skipped, never as passed (CTest label `cuda`).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/device.h"
#include "kernels/cuda/attention_fa.h"
#include "kernels/precision.h"

namespace mt::test {

// First line of every test: skips (not passes) where no GPU can run.
#define MT_REQUIRE_GPU()                                                        \
  do {                                                                          \
    const std::string mt_why_ = ::mt::cuda_unavailable_reason();                \
    if (!mt_why_.empty()) GTEST_SKIP() << "needs a GPU: " << mt_why_;           \
  } while (0)

// A GPU copy of a host vector (DeviceBuffer keeps it alive).
template <class T>
struct OnGpu {
  DeviceBuffer buf;
  int64_t n = 0;
  explicit OnGpu(const std::vector<T>& host)
      : buf(Device::kCuda, host.size() * sizeof(T) + 16), n(int64_t(host.size())) {
    copy_bytes(buf.data(), host.data(), host.size() * sizeof(T));
  }
  explicit OnGpu(int64_t count) : buf(Device::kCuda, size_t(count) * sizeof(T) + 16), n(count) {}
  T* get() const { return buf.as<T>(); }
  std::vector<T> host() const {
    std::vector<T> out(static_cast<size_t>(n));
    copy_bytes(out.data(), buf.data(), size_t(n) * sizeof(T));
    return out;
  }
};

// max |a - b| / max(max |b|, tiny): the relative error of a against the CPU's b.
template <class T>
double rel_max_err(const std::vector<T>& a, const std::vector<T>& b) {
  EXPECT_EQ(a.size(), b.size());
  double err = 0, ref = 1e-30;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double x = double(a[i]), y = double(b[i]);
    if (std::isnan(x) != std::isnan(y)) return INFINITY;
    err = std::max(err, std::fabs(x - y));
    ref = std::max(ref, std::fabs(y));
  }
  return err / ref;
}

// bf16 storage (uint16_t) as floats.
inline std::vector<float> widen_bf16(const std::vector<uint16_t>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const uint32_t u = uint32_t(x[i]) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    out[i] = f;
  }
  return out;
}

// The attention implementation the CUDA entry points use, for one test's scope.
struct UseAttention {
  cuda::AttentionImpl before;
  explicit UseAttention(cuda::AttentionImpl impl) : before(cuda::attention_impl(impl)) {}
  ~UseAttention() { cuda::attention_impl(before); }
};

// bf16 storage of x (rounded to nearest even, as the kernels store).
inline std::vector<uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = bf16_from_f32(x[i]);
  return out;
}

// An array in fp32 or bf16 storage, on the host and (a copy) on the GPU.
struct Stored {
  bool bf16;
  std::vector<float> f;
  std::vector<uint16_t> b;
  std::unique_ptr<OnGpu<float>> gf;
  std::unique_ptr<OnGpu<uint16_t>> gb;
  Stored(const std::vector<float>& x, bool is_bf16) : bf16(is_bf16) {
    if (bf16) {
      b = to_bf16(x);
      gb = std::make_unique<OnGpu<uint16_t>>(b);
    } else {
      f = x;
      gf = std::make_unique<OnGpu<float>>(f);
    }
  }
  WriteView cpu() { return bf16 ? WriteView(b.data()) : WriteView(f.data()); }
  WriteView gpu() { return bf16 ? WriteView(gb->get()) : WriteView(gf->get()); }
  std::vector<float> cpu_values() const { return bf16 ? widen_bf16(b) : f; }
  std::vector<float> gpu_values() const { return bf16 ? widen_bf16(gb->host()) : gf->host(); }
  double tol() const { return bf16 ? 1e-2 : 1e-5; }  // relative, of an output stored so
};

}  // namespace mt::test
