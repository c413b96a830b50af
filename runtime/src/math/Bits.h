//===- Bits.h - Host/device helpers shared by the math headers -*- C++ -*-===//
//
// ZRT_HD (__host__ __device__ under nvcc) and the float <-> bits conversions
// that the branch-free math of VecMath.h and QuantizeMath.h is built on.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_MATH_BITS_H
#define ZRT_MATH_BITS_H

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define ZRT_HD __host__ __device__
#else
#define ZRT_HD
#endif

namespace zrt {
namespace math {

ZRT_HD inline float bitsToFloat(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

ZRT_HD inline uint32_t floatToBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
#endif
}

} // namespace math
} // namespace zrt

#endif // ZRT_MATH_BITS_H
