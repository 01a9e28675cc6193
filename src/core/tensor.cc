#include "core/tensor.h"

namespace mt {

const char* dtype_name(DType t) { return t == DType::kF32 ? "F32" : "BF16"; }

Tensor::Tensor(void* d, DType t, std::initializer_list<int64_t> dims) : data(d), dtype(t) {
  MT_CHECK(dims.size() >= 1 && dims.size() <= 4, "tensor rank ", dims.size(), " not in 1..4");
  for (int64_t x : dims) {
    MT_CHECK(x >= 0, "negative tensor dimension ", x);
    shape[ndim++] = x;
  }
}

int64_t Tensor::numel() const {
  if (ndim == 0) return 0;
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

Tensor Tensor::slice0(int64_t start, int64_t len) const {
  MT_CHECK(ndim >= 1 && start >= 0 && len >= 0 && start + len <= shape[0], "slice [", start, ", ",
           start + len, ") out of dim 0 of ", shape_str());
  Tensor t = *this;
  const int64_t row = numel() / (shape[0] ? shape[0] : 1);
  t.data = static_cast<char*>(data) + size_t(start * row) * dtype_size(dtype);
  t.shape[0] = len;
  return t;
}

Tensor Tensor::reshape(std::initializer_list<int64_t> dims) const {
  Tensor t(data, dtype, dims);
  MT_CHECK(t.numel() == numel(), "reshape ", shape_str(), " to ", t.shape_str(),
           " changes the element count");
  return t;
}

std::string Tensor::shape_str() const {
  std::string s = "(";
  for (int i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

}  // namespace mt
