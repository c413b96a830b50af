//===- NormMath.h - Softmax and layer/RMS normalisation math ----*- C++ -*-===//
//
// The per-element and per-row arithmetic of Softmax / LogSoftmax and
// LayerNormalization / RMSNormalization (docs/kernels.md, "Normalisation and
// softmax"), shared by the CPU kernels (cpu/kernels/Normalization.cpp, in
// their vectorised row loops) and the CUDA kernels
// (cuda/NormalizationKernels.cu, after their shared-memory reductions). The
// row reductions themselves (max, sums) are the backends' own: vector lanes
// on the CPU, a fixed tree per block on the GPU. All inline and ZRT_HD.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_MATH_NORMMATH_H
#define ZRT_MATH_NORMMATH_H

#include "math/ElementwiseMath.h"

#include <cmath>
#include <cstdint>

namespace zrt {
namespace math {

/// exp(x - max): a softmax numerator.
template <typename T> ZRT_HD inline T softmaxExp(T x, T max) {
  return expOf(T(x - max));
}

/// LogSoftmax's shift: max + log(sum of exp(x - max)).
template <typename T> ZRT_HD inline T logSoftmaxShift(T max, T sum) {
  return max + T(std::log(sum));
}

/// x - shift: one LogSoftmax output.
template <typename T> ZRT_HD inline T logSoftmaxValue(T x, T shift) {
  return T(x - shift);
}

/// 1 / sum: Softmax's scale.
template <typename T> ZRT_HD inline T softmaxScale(T sum) { return T(1) / sum; }

/// e * scale: one Softmax output.
template <typename T> ZRT_HD inline T softmaxValue(T e, T scale) {
  return T(e * scale);
}

/// The statistics of one normalised row of `cols` elements from the sums of
/// d and d^2 over d = x - shift (shift = 0 for RMS): mean (0 for RMS) and
/// 1 / sqrt(variance + epsilon), variance = E[d^2] - E[d]^2 clamped at 0
/// (RMS: E[x^2]).
template <typename T, bool RMS>
ZRT_HD inline void normStatistics(T sum, T squares, int64_t cols, T shift,
                                  T epsilon, T &mean, T &invStd) {
  if (RMS) {
    mean = T(0);
    invStd = T(1) / std::sqrt(squares / T(cols) + epsilon);
  } else {
    const T meanShifted = sum / T(cols);
    const T variance =
        std::max(T(0), squares / T(cols) - meanShifted * meanShifted);
    mean = shift + meanShifted;
    invStd = T(1) / std::sqrt(variance + epsilon);
  }
}

/// (v - mean) * invStd * scale: one normalised output without a bias.
template <typename T> ZRT_HD inline T normValue(T v, T m, T s, T scale) {
  return (v - m) * s * scale;
}

/// (v - mean) * invStd * scale + bias.
template <typename T>
ZRT_HD inline T normValueBias(T v, T m, T s, T scale, T bias) {
  return (v - m) * s * scale + bias;
}

/// Stores one statistic (Mean or InvStdDev) in the output's float dtype.
ZRT_HD inline void storeStatistic(void *data, bool isF64, int64_t index,
                                  double value) {
  if (isF64)
    static_cast<double *>(data)[index] = value;
  else
    static_cast<float *>(data)[index] = float(value);
}

} // namespace math
} // namespace zrt

#endif // ZRT_MATH_NORMMATH_H
