//===- ReduceMath.h - Reducer policies of both backends ---------*- C++ -*-===//
//
// The arithmetic of the Reduce* kernels (docs/kernels.md, "Reductions"): one
// policy per reduction with an accumulator type and
//   init()              the identity,
//   add(acc, x)         one element,
//   merge(acc, other)   two partial accumulators (combining order is the
//                       caller's: a fixed tree on the GPU, chunk order on
//                       the CPU),
//   finish(acc, count)  the output element.
// Shared by the CPU kernels (cpu/kernels/Reduce.cpp adds vectorised runs) and
// the CUDA kernels (cuda/ReduceKernels.cu); all inline and ZRT_HD.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_MATH_REDUCEMATH_H
#define ZRT_MATH_REDUCEMATH_H

#include "math/ElementwiseMath.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace zrt {
namespace math {

struct MapIdentity {
  template <typename T> ZRT_HD T operator()(T x) const { return x; }
};
struct MapSquare {
  template <typename T> ZRT_HD T operator()(T x) const { return x * x; }
};
/// |x| (AbsFn: the same expression as the Abs kernel).
using MapAbs = AbsFn;
struct FinishIdentity {
  template <typename T> ZRT_HD T operator()(T acc, int64_t) const {
    return acc;
  }
};
struct FinishMean {
  template <typename T> ZRT_HD T operator()(T acc, int64_t count) const {
    if constexpr (std::is_integral_v<T>)
      return count == 0 ? T(0) : T(acc / T(count));
    else
      return acc / T(count);
  }
};
struct FinishSqrt {
  template <typename T> ZRT_HD T operator()(T acc, int64_t) const {
    return T(std::sqrt(double(acc)));
  }
};
struct FinishLog {
  template <typename T> ZRT_HD T operator()(T acc, int64_t) const {
    return T(std::log(double(acc)));
  }
};

/// The kinds of reducer (the CPU picks its vectorised run loop by kind).
enum class ReducerKind { SumLike, Extremum, Prod, LogSumExp };

/// Sums of f(x): Sum, Mean, SumSquare, L1, L2, LogSum differ only in f and
/// in the final transform.
template <typename T, typename Map, typename Finish> struct SumLike {
  static constexpr ReducerKind kKind = ReducerKind::SumLike;
  using Acc = T;
  using MapFn = Map;
  ZRT_HD static Acc init() { return T(0); }
  ZRT_HD static void add(Acc &acc, T x) { acc += Map{}(x); }
  ZRT_HD static void merge(Acc &acc, const Acc &other) { acc += other; }
  ZRT_HD static T finish(const Acc &acc, int64_t count) {
    return Finish{}(acc, count);
  }
};

/// Max (IsMax) or Min, NaN-propagating like numpy.
template <typename T, bool IsMax> struct Extremum {
  static constexpr ReducerKind kKind = ReducerKind::Extremum;
  using Acc = T;
  ZRT_HD static Acc init() {
    if constexpr (std::is_floating_point_v<T>)
      return IsMax ? -std::numeric_limits<T>::infinity()
                   : std::numeric_limits<T>::infinity();
    else
      return IsMax ? std::numeric_limits<T>::lowest()
                   : std::numeric_limits<T>::max();
  }
  ZRT_HD static void add(Acc &acc, T x) {
    const bool better = IsMax ? x > acc : x < acc;
    acc = (better || x != x) ? x : acc;
  }
  ZRT_HD static void merge(Acc &acc, const Acc &other) { add(acc, other); }
  ZRT_HD static T finish(const Acc &acc, int64_t) { return acc; }
};

template <typename T> struct Prod {
  static constexpr ReducerKind kKind = ReducerKind::Prod;
  using Acc = T;
  ZRT_HD static Acc init() { return T(1); }
  ZRT_HD static void add(Acc &acc, T x) { acc *= x; }
  ZRT_HD static void merge(Acc &acc, const Acc &other) { acc *= other; }
  ZRT_HD static T finish(const Acc &acc, int64_t) { return acc; }
};

/// log(sum(exp(x))) with a running maximum (one pass, no overflow).
template <typename T> struct LogSumExp {
  static constexpr ReducerKind kKind = ReducerKind::LogSumExp;
  struct Acc {
    T max;
    T sum;
  };
  ZRT_HD static T negInf() { return -std::numeric_limits<T>::infinity(); }
  ZRT_HD static Acc init() { return {negInf(), T(0)}; }
  ZRT_HD static void add(Acc &acc, T x) { merge(acc, Acc{x, T(1)}); }
  /// Combines two (max, sum of exp(x - max)) pairs; NaN wins, -inf is empty.
  ZRT_HD static void merge(Acc &acc, const Acc &other) {
    if (acc.max != acc.max || other.max == negInf())
      return;
    if (other.max != other.max || acc.max == negInf()) {
      acc = other;
      return;
    }
    if (other.max > acc.max) {
      acc.sum = acc.sum * expOf(T(acc.max - other.max)) + other.sum;
      acc.max = other.max;
    } else {
      acc.sum += other.max == acc.max
                     ? other.sum
                     : other.sum * expOf(T(other.max - acc.max));
    }
  }
  ZRT_HD static T finish(const Acc &acc, int64_t) {
    if (!std::isfinite(acc.max))
      return acc.max;
    return T(std::log(acc.sum)) + acc.max;
  }
};

template <typename T>
using SumReducer = SumLike<T, MapIdentity, FinishIdentity>;
template <typename T> using MeanReducer = SumLike<T, MapIdentity, FinishMean>;
template <typename T>
using SumSquareReducer = SumLike<T, MapSquare, FinishIdentity>;
template <typename T> using L1Reducer = SumLike<T, MapAbs, FinishIdentity>;
template <typename T> using L2Reducer = SumLike<T, MapSquare, FinishSqrt>;
template <typename T> using LogSumReducer = SumLike<T, MapIdentity, FinishLog>;
template <typename T> using MaxReducer = Extremum<T, true>;
template <typename T> using MinReducer = Extremum<T, false>;
template <typename T> using ProdReducer = Prod<T>;
template <typename T> using LogSumExpReducer = LogSumExp<T>;

/// ArgMax (IsMax) / ArgMin: whether x replaces the best so far, strictly
/// better or, with select_last_index, equal.
template <typename T, bool IsMax>
ZRT_HD inline bool argBetter(T x, T best, bool last) {
  if (IsMax)
    return last ? x >= best : x > best;
  return last ? x <= best : x < best;
}

/// One CumSum step: adds x to the running sum and returns the output
/// element (the sum before x when exclusive).
template <typename T> ZRT_HD inline T cumSumStep(T &acc, T x, bool exclusive) {
  if (exclusive) {
    const T before = acc;
    acc += x;
    return before;
  }
  acc += x;
  return acc;
}

} // namespace math
} // namespace zrt

#endif // ZRT_MATH_REDUCEMATH_H
