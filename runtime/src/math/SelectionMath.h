//===- SelectionMath.h - TopK, OneHot, BatchNormalization -------*- C++ -*-===//
//
// Per-element math of TopK, OneHot and inference BatchNormalization
// (docs/kernels.md), shared by the CPU kernels (cpu/kernels/Selection.cpp,
// Normalization.cpp) and the CUDA ones (cuda/SelectionKernels.cu,
// cuda/SpatialKernels.cu). Inline and ZRT_HD.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_MATH_SELECTIONMATH_H
#define ZRT_MATH_SELECTIONMATH_H

#include "math/ElementwiseMath.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace zrt {
namespace math {

/// TopK's order: whether entry a (value va) comes before entry b (value vb)
/// of a line: the better value (larger, or smaller without `largest`), then
/// the lower index; NaN counts as the largest value. A strict total order on
/// the entries of a line, so every correct sort gives the same result.
template <typename T>
ZRT_HD inline bool topKBefore(T va, int64_t a, T vb, int64_t b, bool largest) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool na = va != va, nb = vb != vb;
    if (na || nb) {
      if (na && nb)
        return a < b;
      return largest ? na : nb;
    }
  }
  if (va != vb)
    return largest ? va > vb : va < vb;
  return a < b;
}

/// OneHot's index: cast to an integer (floats truncate, as ONNX casts),
/// then i < 0 counts as i + depth.
template <typename I>
ZRT_HD inline int64_t oneHotIndex(I value, int64_t depth) {
  int64_t v;
  if constexpr (std::is_floating_point_v<I>)
    v = fromDoubleNum<int64_t>(double(value));
  else
    v = int64_t(value);
  return v < 0 ? v + depth : v;
}

/// OneHot as a functor over the output [outer, depth, inner] (U: the
/// values' bits): y = on where the index at (outer, inner) is the depth
/// coordinate, else off; `values` holds off, on.
template <typename I, typename U> struct OneHotFn {
  const I *indices;
  const U *values;
  U *y;
  int64_t depth, inner;
  ZRT_HD void operator()(int64_t e) const {
    const int64_t i = e % inner, r = e / inner;
    const int64_t o = r / depth, d = r - o * depth;
    y[e] =
        oneHotIndex(indices[o * inner + i], depth) == d ? values[1] : values[0];
  }
};

/// BatchNormalization's per-channel affine map in double: a = scale /
/// sqrt(var + epsilon), b = bias - mean * a, each rounded to T.
template <typename T>
ZRT_HD inline void batchNormCoefficients(T scale, T bias, T mean, T var,
                                         double epsilon, T &a, T &b) {
  const double s = double(scale) / std::sqrt(double(var) + epsilon);
  a = T(s);
  b = T(double(bias) - double(mean) * s);
}

/// One BatchNormalization output: v * a + b.
template <typename T> ZRT_HD inline T batchNormValue(T v, T a, T b) {
  return T(v * a + b);
}

} // namespace math
} // namespace zrt

#endif // ZRT_MATH_SELECTIONMATH_H
