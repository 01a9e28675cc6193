// Tensor: a typed, contiguous, row-major view (shape <= 4-D) of memory owned
// elsewhere (an Arena). Copying a Tensor copies the view, never the data.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/error.h"

namespace mt {

enum class DType : uint8_t { kF32 = 0, kBF16 = 1 };

inline size_t dtype_size(DType t) { return t == DType::kF32 ? 4 : 2; }
const char* dtype_name(DType t);

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int ndim = 0;
  int64_t shape[4] = {0, 0, 0, 0};

  Tensor() = default;
  Tensor(void* d, DType t, std::initializer_list<int64_t> dims);

  int64_t numel() const;
  size_t bytes() const { return size_t(numel()) * dtype_size(dtype); }
  int64_t dim(int i) const {
    MT_DCHECK(i >= 0 && i < ndim, "dim ", i, " of a ", ndim, "-D tensor");
    return shape[i];
  }
  bool empty() const { return data == nullptr; }
  float* f32() const {
    MT_DCHECK(dtype == DType::kF32, "tensor is ", dtype_name(dtype), ", not f32");
    return static_cast<float*>(data);
  }
  // View of rows [start, start+len) along dim 0.
  Tensor slice0(int64_t start, int64_t len) const;
  // Same data, new shape of equal numel.
  Tensor reshape(std::initializer_list<int64_t> dims) const;
  std::string shape_str() const;
};

}  // namespace mt
