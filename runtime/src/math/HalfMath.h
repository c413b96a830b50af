//===- HalfMath.h - f16 and bf16 conversions of both backends ---*- C++ -*-===//
//
// IEEE binary16 and bfloat16 element types (stored as their bits) and their
// exact conversions to and from f32 (round to nearest even; NaN stays NaN),
// used by every kernel that reads or writes them (cpu/kernels: toDouble,
// fromDouble, Cast; the MPI communicator's f16/bf16 sums) and by the CUDA
// kernels. Inline and ZRT_HD.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_MATH_HALFMATH_H
#define ZRT_MATH_HALFMATH_H

#include "math/Bits.h"

#include <cmath>
#include <cstdint>

namespace zrt {
namespace math {

/// IEEE binary16, stored as its bits; converted through float.
struct Float16 {
  uint16_t bits;
};
/// bfloat16 (the upper half of an f32), stored as its bits.
struct BFloat16 {
  uint16_t bits;
};

ZRT_HD inline float halfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else { // subnormal: renormalise
      exponent = 127 - 15 + 1;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      mantissa &= 0x3ffu;
      bits = sign | (exponent << 23) | (mantissa << 13);
    }
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  return math::bitsToFloat(bits);
}

ZRT_HD inline uint16_t floatToHalf(float value) {
  const uint32_t x = math::floatToBits(value);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absBits = x & 0x7fffffffu;
  if (absBits >= 0x7f800000u) // inf, nan
    return uint16_t(sign | 0x7c00u | (absBits > 0x7f800000u ? 0x200u : 0u));
  if (absBits >= 0x477ff000u) // >= 65520 rounds to inf
    return uint16_t(sign | 0x7c00u);
  if (absBits < 0x38800000u) { // below 2^-14: subnormal half (or zero)
    const float scaled =
        math::bitsToFloat(absBits) * 16777216.0f; // exact, < 1024
    return uint16_t(sign | uint32_t(std::nearbyint(scaled)));
  }
  uint32_t h =
      (((absBits >> 23) - 127 + 15) << 10) | ((absBits >> 13) & 0x3ffu);
  const uint32_t rest = absBits & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
    ++h; // a carry into the exponent is the correct rounding
  return uint16_t(sign | h);
}

ZRT_HD inline float bfloat16ToFloat(uint16_t bits) {
  return math::bitsToFloat(uint32_t(bits) << 16);
}

ZRT_HD inline uint16_t floatToBfloat16(float value) {
  const uint32_t x = math::floatToBits(value);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((x >> 16) | 0x40u); // quiet nan
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

} // namespace math
} // namespace zrt

#endif // ZRT_MATH_HALFMATH_H
