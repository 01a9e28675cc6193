// The device seam's host side and, without the CUDA backend, its CPU-only
// answers. The CUDA side (allocation registry, copies, the stream) is
// src/backend/cuda/cuda_device.cu.
#include "backend/device.h"

#include <cstring>
#include <utility>

#include "core/error.h"

namespace mt {

const char* device_name(Device d) { return d == Device::kCuda ? "cuda" : "cpu"; }

Device parse_device(std::string_view name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  MT_FAIL("--device ", std::string(name), " is not a device; fix: --device cpu or --device cuda");
}

void require_device(Device d) {
  if (d == Device::kCpu) return;
  const std::string why = cuda_unavailable_reason();
  MT_CHECK(why.empty(), "--device cuda: ", why);
}

#ifndef MT_CUDA
bool cuda_built() { return false; }
std::string cuda_unavailable_reason() {
  return "this binary was built without the CUDA backend; fix: build with "
         "cmake -DMT_CUDA=ON (scripts/build_cuda.sh), or train with --device cpu";
}
bool on_device(const void*) { return false; }
void device_synchronize() {}
void copy_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}
void fill_zero(void* p, size_t bytes) {
  if (bytes) std::memset(p, 0, bytes);
}
namespace cuda_impl {
char* alloc(size_t) { MT_FAIL("--device cuda: ", cuda_unavailable_reason()); }
void free(char*) {}
}  // namespace cuda_impl
#else
namespace cuda_impl {
char* alloc(size_t bytes);  // cuda_device.cu: cudaMalloc + zero + register
void free(char* p);
}  // namespace cuda_impl
#endif

DeviceBuffer::DeviceBuffer(Device d, size_t bytes) {
  if (d == Device::kCuda) {
    if (bytes == 0) return;
    gpu_ = cuda_impl::alloc(bytes);
    gpu_size_ = bytes;
  } else {
    host_ = HostBuffer(bytes);
  }
}

void DeviceBuffer::release() {
  if (gpu_) cuda_impl::free(gpu_);
  gpu_ = nullptr;
  gpu_size_ = 0;
  host_ = HostBuffer();
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : host_(std::move(o.host_)), gpu_(o.gpu_), gpu_size_(o.gpu_size_) {
  o.gpu_ = nullptr;
  o.gpu_size_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    release();
    host_ = std::move(o.host_);
    gpu_ = o.gpu_;
    gpu_size_ = o.gpu_size_;
    o.gpu_ = nullptr;
    o.gpu_size_ = 0;
  }
  return *this;
}

}  // namespace mt
