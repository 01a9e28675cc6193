#include "core/tensor.h"

#include <gtest/gtest.h>

#include "core/arena.h"
#include "core/divide.h"

namespace mt {

TEST(Arena, PlanThenCarveGivesSameLayout) {
  auto carve = [](Arena& a) {
    Tensor x = a.alloc(DType::kF32, {3, 5});
    Tensor y = a.alloc(DType::kBF16, {7});
    return std::pair{x, y};
  };
  Arena plan;
  carve(plan);
  HostBuffer buf(plan.used());
  Arena real(buf.data(), buf.size());
  auto [x, y] = carve(real);
  EXPECT_EQ(real.used(), plan.used());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(x.data) % kAlign, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(y.data) % kAlign, 0u);
  EXPECT_EQ(x.numel(), 15);
  EXPECT_EQ(y.bytes(), 14u);
  Arena tiny(buf.data(), 64);
  tiny.alloc(DType::kF32, {16});
  EXPECT_THROW(tiny.alloc(DType::kF32, {1}), Error);
}

TEST(Tensor, SliceAndReshape) {
  float data[24];
  for (int i = 0; i < 24; ++i) data[i] = float(i);
  Tensor t(data, DType::kF32, {4, 3, 2});
  Tensor s = t.slice0(1, 2);
  EXPECT_EQ(s.f32()[0], 6.f);
  EXPECT_EQ(s.shape_str(), "(2, 3, 2)");
  EXPECT_THROW(t.slice0(3, 2), Error);
  EXPECT_EQ(t.reshape({12, 2}).dim(0), 12);
  EXPECT_THROW(t.reshape({5, 5}), Error);
}

TEST(Divide, RefusesToTruncate) {
  EXPECT_EQ(divide(12, 4), 3);
  EXPECT_THROW(divide(12, 5, "hidden size by heads"), Error);
}

}  // namespace mt
