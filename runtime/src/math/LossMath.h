//===- LossMath.h - Cross-entropy loss math of both backends ----*- C++ -*-===//
//
// The per-target arithmetic of SoftmaxCrossEntropyLoss and
// NegativeLogLikelihoodLoss (docs/kernels.md, "Losses"), shared by the CPU
// kernels (cpu/kernels/Loss.cpp) and the CUDA ones (cuda/LossKernels.cu).
// The reduction over the targets is serial, in target order, in double, on
// both backends (one GPU thread: the target count is the token count), so
// the loss has the same bits given the same log-probabilities.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_MATH_LOSSMATH_H
#define ZRT_MATH_LOSSMATH_H

#include "math/ElementwiseMath.h"

#include <cmath>
#include <cstdint>

namespace zrt {
namespace math {

/// The loss reduction attribute.
enum class LossReduction { None, Sum, Mean };

/// log(sum(exp(x - max))) + max: the log-sum-exp of a row from its maximum
/// and its sum of exponentials.
template <typename T> ZRT_HD inline T logSumExpOf(T max, T sum) {
  return max + T(std::log(sum));
}

/// One log-probability: x - logsumexp.
template <typename T> ZRT_HD inline T logProbOf(T x, T lse) {
  return T(x - lse);
}

/// Accumulates the negative log-likelihood of one target: `ignored` targets
/// contribute 0 with weight 0. Returns the target's value (the "none"
/// output).
ZRT_HD inline double nllAccumulate(bool ignored, double logProb, double weight,
                                   double &weightedSum, double &weightTotal) {
  double value = 0;
  if (!ignored)
    value = -logProb * weight;
  else
    weight = 0;
  weightedSum += value;
  weightTotal += weight;
  return value;
}

/// The reduced loss from the sums ("sum" or "mean").
ZRT_HD inline double nllReduced(LossReduction reduction, double weightedSum,
                                double weightTotal) {
  return reduction == LossReduction::Sum ? weightedSum
                                         : weightedSum / weightTotal;
}

} // namespace math
} // namespace zrt

#endif // ZRT_MATH_LOSSMATH_H
