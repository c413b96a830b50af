//===- ResizeMath.h - Resize's output elements on both backends -*- C++ -*-===//
//
// One output element of Resize (docs/kernels.md, "Convolution, pooling,
// resampling"): the host code (cpu::prepareResize, cpu/kernels/Resize.cpp)
// computes every dim's taps (input indices and weights per output
// coordinate, from the shapes and attributes only); an output element is
// the sum over the product of its dims' taps, in row-major tap order and in
// double, or for integer types (nearest only) the one input element picked.
// Shared by the CPU kernel and the CUDA one (cuda/SpatialKernels.cu), whose
// ResizeView points at device copies of the taps. Inline and ZRT_HD.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_MATH_RESIZEMATH_H
#define ZRT_MATH_RESIZEMATH_H

#include "math/ElementwiseMath.h"

#include <cstdint>
#include <type_traits>

namespace zrt {
namespace math {

/// Most dims of a Resize.
constexpr int kMaxResizeDims = 8;

/// The taps of every dim, by pointer: output coordinate o of dim d reads
/// input index index[d][o * width[d] + j] with weight weight[d][...];
/// outside[d][o] marks tf_crop_and_resize extrapolation.
struct ResizeView {
  int rank = 0;
  int64_t outShape[kMaxResizeDims] = {}, inStrides[kMaxResizeDims] = {};
  int64_t width[kMaxResizeDims] = {};
  const int64_t *index[kMaxResizeDims] = {};
  const double *weight[kMaxResizeDims] = {};
  const char *outside[kMaxResizeDims] = {};
  int64_t combos = 1; ///< product of width
  double extrapolation = 0;
};

/// Output element i of a Resize of `x`.
template <typename T>
ZRT_HD inline T resizeValue(const ResizeView &v, const T *x, int64_t i) {
  int64_t coord[kMaxResizeDims], pick[kMaxResizeDims];
  int64_t rest = i;
  bool outside = false;
  for (int d = v.rank - 1; d >= 0; --d) {
    coord[d] = rest % v.outShape[d];
    rest /= v.outShape[d];
    outside |= v.outside[d][coord[d]] != 0;
    pick[d] = 0;
  }
  if (outside)
    return fromDoubleNum<T>(v.extrapolation);
  if constexpr (!std::is_floating_point_v<T>) {
    // Nearest only: one tap per dim.
    int64_t offset = 0;
    for (int d = 0; d < v.rank; ++d)
      offset += v.index[d][coord[d]] * v.inStrides[d];
    return x[offset];
  } else {
    double sum = 0;
    for (int64_t c = 0; c < v.combos; ++c) {
      double weight = 1;
      int64_t offset = 0;
      for (int d = 0; d < v.rank; ++d) {
        const int64_t at = coord[d] * v.width[d] + pick[d];
        weight *= v.weight[d][at];
        offset += v.index[d][at] * v.inStrides[d];
      }
      sum += weight * double(x[offset]);
      for (int d = v.rank - 1; d >= 0; --d) {
        if (++pick[d] < v.width[d])
          break;
        pick[d] = 0;
      }
    }
    return T(sum);
  }
}

/// Resize as a functor for the backends' forEach.
template <typename T> struct ResizeFn {
  ResizeView view;
  const T *x;
  T *y;
  ZRT_HD void operator()(int64_t i) const { y[i] = resizeValue(view, x, i); }
};

} // namespace math
} // namespace zrt

#endif // ZRT_MATH_RESIZEMATH_H
