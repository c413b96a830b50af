//===- WindowMath.h - Pool and convolution windows --------------*- C++ -*-===//
//
// The sliding windows of MaxPool / AveragePool and Conv / ConvTranspose
// (docs/kernels.md, "Convolution, pooling, resampling") over the spatial dims
// of [N, C, D1..Dk]: a Window holds the checked geometry by value (the host
// code that reads and checks it is kernels/KernelLayouts.h), and the
// functions here compute one output element of a pool, one element of an
// im2col matrix, or one output element of col2im. Shared by the CPU kernels
// (cpu/kernels/Pool.cpp) and the CUDA ones (cuda/SpatialKernels.cu); all
// inline and ZRT_HD. Taps are visited in row-major order, so a pool's result
// does not depend on the backend or the launch geometry.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_MATH_WINDOWMATH_H
#define ZRT_MATH_WINDOWMATH_H

#include "math/Bits.h"

#include <cstdint>
#include <limits>
#include <type_traits>

namespace zrt {
namespace math {

/// Most spatial dims of a pool or convolution.
constexpr int kMaxWindowDims = 8;

/// The geometry of one pool or convolution over `dims` spatial dims.
struct Window {
  int dims = 0;
  int64_t in[kMaxWindowDims] = {}, out[kMaxWindowDims] = {};
  int64_t kernel[kMaxWindowDims] = {}, stride[kMaxWindowDims] = {};
  int64_t dilation[kMaxWindowDims] = {};
  int64_t padBegin[kMaxWindowDims] = {}, padEnd[kMaxWindowDims] = {};
  int64_t inSize = 1, outSize = 1, kernelSize = 1;
};

/// Calls `fn(offset)` for the input offsets (within one plane) of output
/// position `o`'s window taps inside the input, in row-major tap order, and
/// returns how many taps lie inside [-begin, in + end) (the padded input).
template <typename Fn>
ZRT_HD inline int64_t forEachPoolTap(const Window &g, int64_t o, Fn &&fn) {
  const int k = g.dims;
  int64_t start[kMaxWindowDims], tap[kMaxWindowDims];
  for (int d = k - 1; d >= 0; --d) {
    start[d] = (o % g.out[d]) * g.stride[d] - g.padBegin[d];
    o /= g.out[d];
    tap[d] = 0;
  }
  int64_t padded = 0;
  for (int64_t t = 0; t < g.kernelSize; ++t) {
    int64_t offset = 0;
    bool inside = true, insidePadded = true;
    for (int d = 0; d < k; ++d) {
      const int64_t p = start[d] + tap[d] * g.dilation[d];
      inside &= p >= 0 && p < g.in[d];
      insidePadded &= p >= -g.padBegin[d] && p < g.in[d] + g.padEnd[d];
      offset = offset * g.in[d] + p;
    }
    padded += insidePadded;
    if (inside)
      fn(offset);
    for (int d = k - 1; d >= 0; --d) {
      if (++tap[d] < g.kernel[d])
        break;
      tap[d] = 0;
    }
  }
  return padded;
}

/// MaxPool of output position `o` of `plane`: padding never wins, a NaN tap
/// propagates (the first one met).
template <typename T>
ZRT_HD inline T maxPoolValue(const Window &g, const T *plane, int64_t o) {
  T best = std::numeric_limits<T>::lowest();
  if constexpr (std::is_floating_point_v<T>)
    best = -std::numeric_limits<T>::infinity();
  forEachPoolTap(g, o, [&](int64_t off) {
    const T v = plane[off];
    if (v > best || v != v)
      best = best != best ? best : v;
  });
  return best;
}

/// AveragePool of output position `o`: the sum of the taps inside the input
/// in tap order, divided by their count or (includePad) by the taps inside
/// the padded extent; NaN for an empty window.
template <typename T>
ZRT_HD inline T averagePoolValue(const Window &g, const T *plane, int64_t o,
                                 bool includePad) {
  T sum = T(0);
  int64_t count = 0;
  const int64_t padded = forEachPoolTap(g, o, [&](int64_t off) {
    sum += plane[off];
    ++count;
  });
  const int64_t divisor = includePad ? padded : count;
  return divisor ? T(sum / T(divisor)) : std::numeric_limits<T>::quiet_NaN();
}

/// MaxPool's backward over one plane: dx (inSize) gets each output
/// position's dy at its window's maximum, the tap maxPoolValue takes (the
/// first maximum in tap order, the first NaN; the first tap if every one is
/// -inf), adding over overlapping windows in output order.
template <typename T>
ZRT_HD inline void maxPoolGradPlane(const Window &g, const T *x, const T *dy, T *dx) {
  for (int64_t i = 0; i < g.inSize; ++i)
    dx[i] = T(0);
  for (int64_t o = 0; o < g.outSize; ++o) {
    T best = T(0);
    int64_t at = -1;
    forEachPoolTap(g, o, [&](int64_t off) {
      const T v = x[off];
      if (at < 0 || (best == best && (v > best || v != v))) {
        best = v;
        at = off;
      }
    });
    if (at >= 0)
      dx[at] += dy[o];
  }
}

/// MaxPool's backward of plane p (of [planes, inSize] / [planes, outSize]):
/// a functor for the backends' forEach over planes.
template <typename T> struct MaxPoolGradFn {
  Window g;
  const T *x, *dy;
  T *dx;
  ZRT_HD void operator()(int64_t p) const {
    maxPoolGradPlane(g, x + p * g.inSize, dy + p * g.outSize, dx + p * g.inSize);
  }
};

/// One output element i of a pool over [planes, outSize]: a functor for the
/// backends' forEach.
template <typename T, bool Max> struct PoolFn {
  Window g;
  const T *x;
  T *y;
  bool includePad;
  ZRT_HD void operator()(int64_t i) const {
    const T *plane = x + (i / g.outSize) * g.inSize;
    if constexpr (Max)
      y[i] = maxPoolValue(g, plane, i % g.outSize);
    else
      y[i] = averagePoolValue(g, plane, i % g.outSize, includePad);
  }
};

/// Element (row, column) of one group's im2col matrix [channels * K,
/// outSize] over `x` ([channels, D1..Dk]): row = channel * K + tap, the tap
/// in row-major order; zero where the tap falls in the padding.
template <typename T>
ZRT_HD inline T im2colValue(const Window &g, const T *x, int64_t row,
                            int64_t column) {
  const int64_t c = row / g.kernelSize;
  int64_t t = row - c * g.kernelSize, o = column;
  int64_t offset = 0, scale = 1;
  for (int d = g.dims - 1; d >= 0; --d) {
    const int64_t p = (o % g.out[d]) * g.stride[d] - g.padBegin[d] +
                      (t % g.kernel[d]) * g.dilation[d];
    o /= g.out[d];
    t /= g.kernel[d];
    if (p < 0 || p >= g.in[d])
      return T(0);
    offset += p * scale;
    scale *= g.in[d];
  }
  return x[c * g.inSize + offset];
}

/// ConvTranspose's col2im for output position `o` of one output channel:
/// `start` plus, for each tap in row-major order, the column entry
/// col[tap * inSize + i] of the input position i that the tap maps onto `o`
/// (input position i * stride + tap * dilation - padBegin), if any. The
/// window's `in` is ConvTranspose's input and `out` its output.
template <typename T>
ZRT_HD inline T col2imValue(const Window &g, const T *col, int64_t o, T start) {
  int64_t pos[kMaxWindowDims];
  for (int d = g.dims - 1; d >= 0; --d) {
    pos[d] = o % g.out[d];
    o /= g.out[d];
  }
  T sum = start;
  for (int64_t t = 0; t < g.kernelSize; ++t) {
    int64_t rest = t, offset = 0, scale = 1;
    bool inside = true;
    for (int d = g.dims - 1; d >= 0; --d) {
      const int64_t q =
          pos[d] + g.padBegin[d] - (rest % g.kernel[d]) * g.dilation[d];
      rest /= g.kernel[d];
      const int64_t i = q >= 0 ? q / g.stride[d] : -1;
      inside &= q >= 0 && i * g.stride[d] == q && i < g.in[d];
      offset += i * scale;
      scale *= g.in[d];
    }
    if (inside)
      sum += col[t * g.inSize + offset];
  }
  return sum;
}

} // namespace math
} // namespace zrt

#endif // ZRT_MATH_WINDOWMATH_H
