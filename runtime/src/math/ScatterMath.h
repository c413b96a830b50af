//===- ScatterMath.h - Scatter reductions of both backends ------*- C++ -*-===//
//
// How ScatterElements and ScatterND combine an update with the element it
// lands on (docs/kernels.md, "Gather and scatter"), shared by the CPU
// kernels (cpu/kernels/Indexing.cpp) and the CUDA ones
// (cuda/IndexingKernels.cu). Updates are applied in index order on both.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_MATH_SCATTERMATH_H
#define ZRT_MATH_SCATTERMATH_H

#include "math/Bits.h"

namespace zrt {
namespace math {

/// The reduction attribute of the scatters.
enum class ScatterReduction { None, Add, Mul, Max, Min };

template <typename T>
ZRT_HD inline void scatterInto(T &dst, T value, ScatterReduction reduction) {
  switch (reduction) {
  case ScatterReduction::None:
    dst = value;
    break;
  case ScatterReduction::Add:
    dst = T(dst + value);
    break;
  case ScatterReduction::Mul:
    dst = T(dst * value);
    break;
  case ScatterReduction::Max:
    dst = value > dst ? value : dst;
    break;
  case ScatterReduction::Min:
    dst = value < dst ? value : dst;
    break;
  }
}

} // namespace math
} // namespace zrt

#endif // ZRT_MATH_SCATTERMATH_H
