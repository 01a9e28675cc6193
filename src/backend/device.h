// The device seam. A run's memory lives on one device: host memory, or (in
// builds with the CUDA backend, cmake -DMT_CUDA=ON) GPU memory owned by a
// DeviceBuffer. A kernel's entry point (src/kernels/<op>.h) is one function
// for both: when its output lies in GPU memory it runs its CUDA twin
// (src/kernels/cuda/<op>.h, same signature) on the backend's stream, else
// its CPU code. The caller never knows which runs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/arena.h"

namespace mt {

enum class Device : uint8_t { kCpu, kCuda };

const char* device_name(Device d);  // "cpu", "cuda"
// "cpu" or "cuda" (Megatron-style --device); anything else is an error naming the value.
Device parse_device(std::string_view name);

// Whether this binary was built with the CUDA backend.
bool cuda_built();
// Empty when --device cuda can run here; else one line: the cause (no CUDA
// build, no GPU, a driver older than the runtime) and the fix.
std::string cuda_unavailable_reason();
// Ends with that line (MT_CHECK) when `d` cannot run here; no-op for the CPU.
void require_device(Device d);

// True when p points into GPU memory owned by a DeviceBuffer (always false
// without the CUDA backend). Cheap: a scan of the few live GPU allocations.
bool on_device(const void* p);

// Bytes on one device, zero-filled at allocation: on the CPU a HostBuffer
// (aligned, touched at start-up), on the GPU one cudaMalloc.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device d, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  char* data() const { return gpu_ ? gpu_ : host_.data(); }
  size_t size() const { return gpu_ ? gpu_size_ : host_.size(); }
  Device device() const { return gpu_ ? Device::kCuda : Device::kCpu; }
  // Memory this buffer really holds: on the CPU what its first touch added
  // to the process (HostBuffer::resident_bytes), on the GPU its size.
  size_t resident_bytes() const { return gpu_ ? gpu_size_ : host_.resident_bytes(); }
  template <class T>
  T* as() const { return reinterpret_cast<T*>(data()); }

 private:
  void release();
  HostBuffer host_;
  char* gpu_ = nullptr;
  size_t gpu_size_ = 0;
};

// dst = src, `bytes` bytes, between any two places (host or GPU). Returns
// when dst may be read by the host (a copy to the host waits for the GPU).
void copy_bytes(void* dst, const void* src, size_t bytes);
// p[0, bytes) = 0 on p's device (asynchronous on the GPU).
void fill_zero(void* p, size_t bytes);
// Waits until all GPU work launched so far has finished (no-op without CUDA).
void device_synchronize();

}  // namespace mt

// In a kernel's entry point: `if (MT_ON_DEVICE(out)) return cuda::op(...);`.
// Without the CUDA backend the condition is the literal false, so the twin is
// never referenced (and need not exist). Only src/backend and src/kernels are
// compiled with MT_CUDA; code above them asks on_device() (false in a CPU build).
#ifdef MT_CUDA
#define MT_ON_DEVICE(ptr) (::mt::on_device(ptr))
#else
#define MT_ON_DEVICE(ptr) false
#endif
