//===- FusedMath.h - FusedElementwise's ops on both backends ----*- C++ -*-===//
//
// The opcodes of FusedElementwise (docs/kernels.md, "Fused elementwise") and
// the functor each one runs: the single-op kernels' functors of
// math/ElementwiseMath.h, with Pow by a constant exponent as Pow's kernel
// runs it (powByScalar's special exponents, else PowFn). The CPU kernel
// (cpu/kernels/Fused.cpp) runs each op over a block with the functor
// withFusedUnary / withFusedBinary pick; the CUDA kernel
// (cuda/FusedKernels.cu) applies fusedUnary / fusedBinary per element. Each
// op's result is an f32 either way, so both round like the ops one by one.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_MATH_FUSEDMATH_H
#define ZRT_MATH_FUSEDMATH_H

#include "math/ElementwiseMath.h"

#include <cstdint>

namespace zrt {
namespace math {

/// Opcodes of the `ops` attribute (docs/kernels.md).
enum FusedOpcode : int64_t {
  kFusedAdd = 0,
  kFusedSub = 1,
  kFusedMul = 2,
  kFusedDiv = 3,
  kFusedPow = 4, ///< b must be a constant: the exponent
  kFusedNeg = 5,
  kFusedAbs = 6,
  kFusedRelu = 7,
  kFusedSqrt = 8,
  kFusedReciprocal = 9,
  kFusedExp = 10,
  kFusedLog = 11,
  kFusedTanh = 12,
  kFusedErf = 13,
  kFusedSigmoid = 14,
  kFusedCast = 15, ///< the operand itself, rounded to the op's type (op_types)
  kFusedNumOpcodes = 16,
};

ZRT_HD inline bool isFusedBinary(int64_t code) {
  return code >= kFusedAdd && code <= kFusedPow;
}

/// Pow(x, e) for an exponent that is not one of powByScalar's.
struct PowByFn {
  float e;
  ZRT_HD float operator()(float x) const { return PowFn{}(x, e); }
};

/// Calls f(functor) with the unary functor of `code` (Pow: x^exponent);
/// does nothing for a binary or unknown code.
template <typename F>
ZRT_HD inline void withFusedUnary(int64_t code, float exponent, F &&f) {
  switch (code) {
  case kFusedNeg:
    return f(NegFn{});
  case kFusedAbs:
    return f(AbsFn{});
  case kFusedRelu:
    return f(ReluFn{});
  case kFusedSqrt:
    return f(SqrtFn{});
  case kFusedReciprocal:
    return f(ReciprocalFn{});
  case kFusedExp:
    return f(ExpFn{});
  case kFusedLog:
    return f(LogFn{});
  case kFusedTanh:
    return f(TanhFn{});
  case kFusedErf:
    return f(ErfFn{});
  case kFusedSigmoid:
    return f(SigmoidFn{});
  case kFusedCast:
    // A conversion between f32, f16 and bf16: the value as it is; the
    // rounding to the op's type (FusedProgram's per-op type) converts it.
    return f(IdentityFn{});
  case kFusedPow:
    // Pow's kernel with a scalar exponent and a base of the output's shape
    // (the only Pow the compiler fuses): powByScalar's loops, else PowFn.
    if (exponent == 2.0f)
      return f(SquareFn{});
    if (exponent == 3.0f)
      return f(CubeFn{});
    if (exponent == 1.0f)
      return f(IdentityFn{});
    if (exponent == 0.5f)
      return f(SqrtFn{});
    if (exponent == -1.0f)
      return f(ReciprocalFn{});
    return f(PowByFn{exponent});
  default:
    return;
  }
}

/// Calls f(functor) with the binary functor of `code` (Add Sub Mul Div).
template <typename F> ZRT_HD inline void withFusedBinary(int64_t code, F &&f) {
  switch (code) {
  case kFusedAdd:
    return f(AddFn{});
  case kFusedSub:
    return f(SubFn{});
  case kFusedMul:
    return f(MulFn{});
  case kFusedDiv:
    return f(DivFn{});
  default:
    return;
  }
}

/// One unary op on one element.
ZRT_HD inline float fusedUnary(int64_t code, float exponent, float x) {
  float r = 0.0f;
  withFusedUnary(code, exponent, [&](auto fn) { r = fn(x); });
  return r;
}

/// One binary op (Add Sub Mul Div) on one element.
ZRT_HD inline float fusedBinary(int64_t code, float a, float b) {
  float r = 0.0f;
  withFusedBinary(code, [&](auto fn) { r = fn(a, b); });
  return r;
}

} // namespace math
} // namespace zrt

#endif // ZRT_MATH_FUSEDMATH_H
