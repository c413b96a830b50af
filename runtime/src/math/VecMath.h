//===- VecMath.h - Vectorisable exp, log, tanh, erf, sigmoid --*- C++ -*-===//
//
// Branch-free float approximations of the transcendental functions that the
// kernels apply to whole tensors. A scalar libm call (expf, tanhf, ...) keeps
// a loop from vectorising, and tanhf and erff cost 12-14 ns per element;
// these are written so that GCC and Clang vectorise loops over them at -O3
// with the baseline ISA (SSE2 on x86-64): polynomials after a range
// reduction, 2^n built from integer bits, and every case split as a select
// between values computed for all lanes (no branches, no library calls).
//
// Accuracy, against the correctly rounded result (libm in double, rounded):
// within 1 ulp for every f32 input, with or without FMA contraction (GCC fuses
// a*b+c in the kernels' AVX2 and AVX-512 clones). zrt-vecmath-sweep
// (runtime/test/math/VecMathSweepTool.cpp) checks all 2^32 inputs,
// VecMathTest.cpp a dense subset. Special values are exact: f(+-0) and f(+-inf) as in C99
// Annex F, NaN gives NaN, exp overflows to inf and underflows through the
// subnormals (rounded, not flushed) to +0, tanh and erf reach +-1, sigmoid
// reaches 1 and decays through the subnormals to +0, log(x < 0) is NaN.
//
// Pure functions on float with no dependency on the CPU backend, and
// __host__ __device__ under nvcc, so that other backends can share them. They
// rely on IEEE semantics: no -ffast-math.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_MATH_VECMATH_H
#define ZRT_MATH_VECMATH_H

#include "math/Bits.h"

#include <cstdint>

namespace zrt {
namespace math {

/// |x| and |magnitude| with the sign of `sign`, on the bits.
ZRT_HD inline float absFloat(float x) {
  return bitsToFloat(floatToBits(x) & 0x7fffffffu);
}
ZRT_HD inline float withSignOf(float magnitude, float sign) {
  return bitsToFloat((floatToBits(magnitude) & 0x7fffffffu) |
                     (floatToBits(sign) & 0x80000000u));
}

/// cond ? a : b through bit masks. With a plain ?: GCC may move the float
/// operations that use the result into the two arms of a branch, which it
/// then cannot vectorise under -ftrapping-math (the default); every
/// conditional on floats below goes through this.
ZRT_HD inline float selectFloat(bool cond, float a, float b) {
  const uint32_t mask = 0u - uint32_t(cond);
  return bitsToFloat((floatToBits(a) & mask) | (floatToBits(b) & ~mask));
}

/// max(x, lo) and min(x, hi), with NaN staying NaN.
ZRT_HD inline float atLeast(float x, float lo) {
  return selectFloat(x < lo, lo, x);
}
ZRT_HD inline float atMost(float x, float hi) {
  return selectFloat(x > hi, hi, x);
}

/// e^x as (hi + lo) * scale1 * scale2: hi is e^r rounded to f32 and lo the
/// rest (within ~1e-9 of e^r), the scales are powers of 2. e^x = 2^n e^r with
/// n = round(x / ln 2) (the 1.5 * 2^23 trick) and r = x - n ln 2 = rHi + rLo
/// (Cody-Waite: rHi = x - n * 0.693359375 is exact); e^r = 1 + r + r^2 P(r)
/// with Cephes' P on |r| <= ln2 / 2, summed with exact two-term sums (Fast2Sum)
/// so that only the last rounding counts. 2^n is two factors 2^(n/2) so that
/// subnormal results are rounded once and overflow gives inf.
struct ExpParts {
  float hi, lo, scale1, scale2;
};
ZRT_HD inline ExpParts expParts(float x) {
  // Clamped to where the result is 0 or inf anyway; NaN passes through.
  const float clamped = atMost(atLeast(x, -104.0f), 89.0f);
  const float magic = 12582912.0f;
  const float shifted = clamped * 1.44269504088896341f + magic;
  const float n = shifted - magic;
  const int32_t ni = int32_t(floatToBits(shifted) - floatToBits(magic));
  const float rHi = clamped - n * 0.693359375f;
  const float rLo = n * 2.12194440e-4f;
  const float r = rHi + rLo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  // 1 + rHi is one plus (rHi - (one - 1)) exactly, since 1 >= |rHi|;
  // likewise hi + lo for the total.
  const float one = 1.0f + rHi;
  const float tail = (rHi - (one - 1.0f)) + (rLo + p * (r * r));
  const float hi = one + tail;
  const int32_t half = ni >> 1;
  return {hi, tail - (hi - one), bitsToFloat(uint32_t(half + 127) << 23),
          bitsToFloat(uint32_t(ni - half + 127) << 23)};
}

/// e^x, within 1 ulp.
ZRT_HD inline float exp(float x) {
  const ExpParts e = expParts(x);
  return e.hi * e.scale1 * e.scale2;
}

/// Natural logarithm: x = m 2^k with m in [sqrt(1/2), sqrt(2)) (subnormals
/// scaled by 2^23 first), log(m) = f - f^2/2 + s (f^2/2 + R(s^2)) with
/// f = m - 1 and s = f / (2 + f) (fdlibm's logf), plus k ln 2 in two parts.
ZRT_HD inline float log(float x) {
  const float inf = bitsToFloat(0x7f800000u);
  const bool subnormal = x < 0x1p-126f;
  const float scaled = selectFloat(subnormal, x * 8388608.0f, x);
  const uint32_t bits = floatToBits(scaled) + (0x3f800000u - 0x3f3504f3u);
  const int32_t k = int32_t(bits >> 23) - 127 - 23 * int32_t(subnormal);
  const float m = bitsToFloat((bits & 0x007fffffu) + 0x3f3504f3u);
  const float f = m - 1.0f;
  const float s = f / (2.0f + f);
  const float z = s * s;
  const float w = z * z;
  const float t1 = w * (0.40000972152f + w * 0.24279078841f);
  const float t2 = z * (0.66666662693f + w * 0.28498786688f);
  const float halfSquare = 0.5f * f * f;
  const float dk = float(k);
  const float result = s * (halfSquare + (t1 + t2)) + dk * 9.0580006145e-06f -
                       halfSquare + f + dk * 6.9313812256e-01f;
  // x < 0: NaN; +-0: -inf; +inf and NaN: x itself.
  const float special = selectFloat(x < 0.0f, bitsToFloat(0x7fc00000u),
                                    selectFloat(x == 0.0f, -inf, x));
  // (& rather than &&, which would be a branch.)
  return selectFloat((x > 0.0f) & (x < inf), result, special);
}

/// tanh, odd: on |x| < 0.625 Cephes' |x| + |x|^3 P(x^2), above that
/// 1 - 2 / (e^(2|x|) + 1) (|x| clamped at 10, where tanh is 1 in f32); then
/// x's sign.
ZRT_HD inline float tanh(float x) {
  const float ax = absFloat(x);
  const float z = ax * ax;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * ax + ax;
  const float large = 1.0f - 2.0f / (exp(2.0f * atMost(ax, 10.0f)) + 1.0f);
  return withSignOf(selectFloat(ax < 0.625f, small, large), x);
}

/// erf, odd: on |x| < 1, |x| + |x| P(x^2); above that 1 - e^(-x^2) Q(t) with
/// Q(t) ~ e^(x^2) erfc(x) in t = 1 / (1 + |x|/2) (|x| clamped at 4, where erf
/// is 1 in f32); then x's sign. P and Q are Chebyshev fits (mpmath), with
/// relative errors of 1.3e-9 and 3.5e-9.
ZRT_HD inline float erf(float x) {
  const float ax = absFloat(x);
  const float z = ax * ax;
  float p = 7.875874871e-05f;
  p = p * z - 8.016864303e-04f;
  p = p * z + 5.189087242e-03f;
  p = p * z - 2.685421146e-02f;
  p = p * z + 1.128359437e-01f;
  p = p * z - 3.761262596e-01f;
  p = p * z + 1.283791661e-01f;
  const float small = ax + ax * p;
  const float xc = atMost(ax, 4.0f);
  const float t = 1.0f / (1.0f + 0.5f * xc);
  float q = 1.208524331e-01f;
  q = q * t - 4.765252769e-01f;
  q = q * t + 5.712651610e-01f;
  q = q * t - 1.102082953e-01f;
  q = q * t + 3.510303199e-01f;
  q = q * t + 2.587513626e-01f;
  q = q * t + 2.850616276e-01f;
  q = q * t - 1.642363932e-04f;
  const float large = 1.0f - exp(-(xc * xc)) * q;
  return withSignOf(selectFloat(ax < 1.0f, small, large), x);
}

/// 1 / (1 + e^-x) as (x < 0 ? e : 1) / (1 + e) with e = e^-|x| <= 1: no
/// overflow, and for x < 0 the result decays with e through the subnormals.
/// For x < 0 the result inherits e's whole relative error, and rounding e and
/// 1 + e to f32 first could cost 2 ulp: e stays hi + lo, 1 + e is split
/// exactly into d + dLow, and the quotient q = num / d gets the correction
/// (numLo - q dLow) / d, a few ulps of q, so that 1/d to 0.4% (one Newton
/// step from a linear guess on [1, 2]) is enough there.
ZRT_HD inline float sigmoid(float x) {
  const ExpParts e = expParts(-absFloat(x));
  const float eHi = e.hi * e.scale1 * e.scale2;
  const float eLo = e.lo * e.scale1 * e.scale2;
  const float d = 1.0f + eHi;
  const float dLow = (eHi - (d - 1.0f)) + eLo; // Fast2Sum: 1 >= eHi
  const bool negative = x < 0.0f;
  const float num = selectFloat(negative, eHi, 1.0f);
  const float numLo = selectFloat(negative, eLo, 0.0f);
  const float q = num / d;
  const float guess = 1.4117647f - 0.47058824f * d; // 24/17 - 8/17 d
  const float inverse = guess * (2.0f - d * guess);
  return q + (numLo - q * dLow) * inverse;
}

} // namespace math
} // namespace zrt

#endif // ZRT_MATH_VECMATH_H
