// Memory planned once. An Arena hands out aligned tensors from one block.
// Use it twice with the same carve function: first as a counting arena (no
// memory, just the total), then over a HostBuffer of that size. The buffer is
// allocated with MADV_HUGEPAGE and touched at start-up, because first touch of
// fresh pages costs ~0.3 GB/s on these VMs and reuse 23-36 GB/s.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "core/tensor.h"

namespace mt {

inline constexpr size_t kAlign = 64;

// Owns one aligned, pre-touched allocation.
class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(size_t bytes);
  ~HostBuffer();
  HostBuffer(HostBuffer&& o) noexcept;
  HostBuffer& operator=(HostBuffer&& o) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  char* data() const { return data_; }
  size_t size() const { return size_; }
  // Growth of the process's resident memory across the start-up first touch
  // (/proc/self/statm before and after): the memory this buffer really added.
  // It may differ from size() by page / huge-page rounding, by pages the
  // allocator reused that were already resident (then smaller), or by other
  // threads allocating at the same moment. 0 where /proc is unavailable.
  size_t resident_bytes() const { return resident_; }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
  size_t resident_ = 0;
};

// Scratch that only grows: buf's data, reallocated first when smaller than
// `bytes` (then reused by every call that fits).
inline void* grown(HostBuffer& buf, size_t bytes) {
  if (buf.size() < bytes) buf = HostBuffer(bytes);
  return buf.data();
}

// Resident set size of this process now (/proc/self/statm), and its peak
// (VmHWM in /proc/self/status). 0 where /proc is unavailable.
size_t current_rss_bytes();
size_t peak_rss_bytes();

class Arena {
 public:
  // Counting arena: records sizes only; tensors come back with data == nullptr.
  Arena() = default;
  // Real arena over [base, base + capacity).
  Arena(char* base, size_t capacity) : base_(base), capacity_(capacity) {}

  Tensor alloc(DType t, std::initializer_list<int64_t> dims);
  float* alloc_f32(int64_t n);
  size_t used() const { return used_; }
  bool counting() const { return base_ == nullptr; }

 private:
  char* base_ = nullptr;
  size_t capacity_ = 0;
  size_t used_ = 0;
};

}  // namespace mt
