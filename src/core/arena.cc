#include "core/arena.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <utility>

namespace mt {

HostBuffer::HostBuffer(size_t bytes) {
  if (bytes == 0) return;
  const size_t huge = size_t(2) << 20;
  size_ = (bytes + huge - 1) / huge * huge;
  void* p = std::aligned_alloc(huge, size_);
  MT_CHECK(p != nullptr, "out of memory allocating ", size_, " bytes; reduce the model, ",
           "micro-batch or sequence length");
  madvise(p, size_, MADV_HUGEPAGE);
  std::memset(p, 0, size_);  // first touch now, not inside the step loop
  data_ = static_cast<char*>(p);
}

HostBuffer::~HostBuffer() { std::free(data_); }

HostBuffer::HostBuffer(HostBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    std::free(data_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

Tensor Arena::alloc(DType t, std::initializer_list<int64_t> dims) {
  Tensor out(nullptr, t, dims);
  const size_t bytes = (out.bytes() + kAlign - 1) / kAlign * kAlign;
  if (!counting()) {
    MT_CHECK(used_ + bytes <= capacity_, "arena overflow: need ", used_ + bytes, " bytes of ",
             capacity_, " planned (internal error: plan and carve differ)");
    out.data = base_ + used_;
  }
  used_ += bytes;
  return out;
}

float* Arena::alloc_f32(int64_t n) { return alloc(DType::kF32, {n}).f32(); }

}  // namespace mt
