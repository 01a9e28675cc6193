// The CUDA side of the device seam: GPU allocations (registered so that
// on_device() can tell GPU pointers from host ones), copies, the stream, and
// why --device cuda cannot run here.
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/device.h"

namespace mt {

namespace {

struct Range {
  const char* begin;
  const char* end;
};

// The live GPU allocations (a handful per run: the arena's buffers).
struct Registry {
  std::mutex mu;
  std::vector<Range> ranges;
};
// Never destroyed: static scratch buffers of the kernels may be freed after
// other statics at exit and still look themselves up here.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

std::string reason_now() {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (driver == 0)
    return "no NVIDIA driver is installed here (no libcuda.so; nvidia-smi would fail); fix: run "
           "on a machine with an NVIDIA GPU and its driver, or train with --device cpu";
  if (e == cudaErrorInsufficientDriver || driver < runtime)
    return "the NVIDIA driver supports CUDA " + std::to_string(driver / 1000) + "." +
           std::to_string(driver % 1000 / 10) + " but this binary needs CUDA " +
           std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10) +
           "; fix: update the driver, or train with --device cpu";
  if (e == cudaErrorNoDevice || (e == cudaSuccess && count == 0))
    return "no CUDA GPU is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES); fix: run on a "
           "machine with an NVIDIA GPU, or train with --device cpu";
  if (e != cudaSuccess)
    return std::string("the CUDA runtime cannot start (") + cudaGetErrorString(e) +
           "); fix: check the driver with nvidia-smi, or train with --device cpu";
  return "";
}

}  // namespace

bool cuda_built() { return true; }

std::string cuda_unavailable_reason() {
  static const std::string reason = reason_now();
  return reason;
}

bool on_device(const void* p) {
  const char* c = static_cast<const char*>(p);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const Range& x : r.ranges)
    if (c >= x.begin && c < x.end) return true;
  return false;
}

namespace cuda_impl {
char* alloc(size_t bytes) {
  require_device(Device::kCuda);
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    MT_FAIL("cannot allocate ", bytes / 1e9, " GB on the GPU (", cudaGetErrorString(e), "; ",
            free_b / 1e9, " GB free of ", total_b / 1e9,
            "); fix: a smaller --micro-batch-size, recompute, or more model parallelism");
  }
  MT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, cuda::stream()));
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.ranges.push_back({static_cast<char*>(p), static_cast<char*>(p) + bytes});
  return static_cast<char*>(p);
}

void free(char* p) {
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (size_t i = 0; i < r.ranges.size(); ++i)
      if (r.ranges[i].begin == p) {
        r.ranges.erase(r.ranges.begin() + long(i));
        break;
      }
  }
  cudaStreamSynchronize(cuda::stream());  // no kernel may still use it
  cudaFree(p);
}
}  // namespace cuda_impl

void copy_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (!on_device(dst) && !on_device(src)) {  // host to host (CPU runs of a CUDA build)
    std::memcpy(dst, src, bytes);
    return;
  }
  MT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cuda::stream()));
  if (!on_device(dst)) MT_CUDA_CHECK(cudaStreamSynchronize(cuda::stream()));
}

void fill_zero(void* p, size_t bytes) {
  if (bytes == 0) return;
  if (on_device(p))
    MT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, cuda::stream()));
  else
    std::memset(p, 0, bytes);
}

void device_synchronize() {
  if (cuda_unavailable_reason().empty()) MT_CUDA_CHECK(cudaStreamSynchronize(cuda::stream()));
}

namespace cuda {
cudaStream_t stream() {
  static cudaStream_t s = [] {
    require_device(Device::kCuda);
    cudaStream_t st = nullptr;
    MT_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    return st;
  }();
  return s;
}
}  // namespace cuda

}  // namespace mt
