//===- ShapeMath.h - Element math of the data movement kernels --*- C++ -*-===//
//
// The little arithmetic of Trilu and Range (docs/kernels.md, "Data
// movement"), shared by the CPU kernels (cpu/kernels/Shape.cpp) and the
// CUDA ones (cuda/ShapeKernels.cu). Inline and ZRT_HD.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_MATH_SHAPEMATH_H
#define ZRT_MATH_SHAPEMATH_H

#include "math/Bits.h"

#include <cstdint>
#include <type_traits>

namespace zrt {
namespace math {

/// Trilu: the columns [begin, end) of row i (of `cols`) that are kept; the
/// others become 0. upper: j >= i + k; lower: j <= i + k.
ZRT_HD inline void triluKept(int64_t i, int64_t k, int64_t cols, bool upper,
                             int64_t &begin, int64_t &end) {
  begin = 0;
  end = cols;
  const int64_t edge = upper ? i + k : i + k + 1;
  const int64_t clamped = edge < 0 ? 0 : (edge > cols ? cols : edge);
  if (upper)
    begin = clamped;
  else
    end = clamped;
}

/// Element i of Range: start + i * delta (integers wrap like C; floats in
/// double, rounded once).
template <typename T> struct RangeFn {
  T start, delta;
  T *dst;
  ZRT_HD void operator()(int64_t i) const {
    if constexpr (std::is_integral_v<T>)
      dst[i] = T(start + T(i) * delta);
    else
      dst[i] = T(double(start) + double(i) * double(delta));
  }
};

} // namespace math
} // namespace zrt

#endif // ZRT_MATH_SHAPEMATH_H
