//===- QuantizeMath.h - Blockwise int8/int4 quantization math ---*- C++ -*-===//
//
// The per-block and per-element arithmetic of Quantize / Dequantize
// (docs/kernels.md, "Quantization"), shared by the CPU kernels
// (cpu/kernels/Quantize.cpp) and the CUDA ones (cuda/QuantizeKernels.cu) so
// both backends produce the same bits. Everything here is inline, branch-free
// where it sits in a loop (the CPU loops vectorise over it), and
// __host__ __device__ when compiled by nvcc. Host-only code (attribute parsing,
// error messages) lives in kernels/QuantizeLayout.h.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_MATH_QUANTIZEMATH_H
#define ZRT_MATH_QUANTIZEMATH_H

#include "math/Bits.h"

#include <cfloat>
#include <cstdint>

namespace zrt {
namespace qmath {

/// Adding and subtracting 1.5 * 2^52 rounds a double of magnitude below 2^51
/// to an integer, half to even (nearbyint in the default rounding mode), in a
/// form every vector ISA has (and that nvcc does not reassociate).
constexpr double kRoundMagic = 6755399441055744.0;

/// The bits of |x| for an f32 at or above this are an inf or a NaN.
constexpr uint32_t kNonFiniteBits = 0x7f800000u;

/// The largest |q|: 127 for int8, 7 for int4.
ZRT_HD inline int qmax(int bits) { return bits == 8 ? 127 : 7; }

/// B: the number of blocks of a chunk of m elements (the last may be short).
ZRT_HD inline int64_t blocksPerChunk(int64_t m, int64_t block) {
  return (m + block - 1) / block;
}

/// D: the bytes of a chunk of m elements: m (int8) or ceil(m / 2) (int4).
ZRT_HD inline int64_t bytesPerChunk(int64_t m, int bits) {
  return bits == 8 ? m : (m + 1) / 2;
}

/// The bits of |x| (integer compares order the bits of non-negative floats).
ZRT_HD inline uint32_t absBits(float x) {
  return math::floatToBits(x) & 0x7fffffffu;
}

/// The float with these bits.
ZRT_HD inline float fromBits(uint32_t bits) { return math::bitsToFloat(bits); }

/// The sizes that a Quantize / Dequantize instruction's attributes and
/// element count give (filled and checked on the host by
/// cpu::prepareQuantize / cpu::prepareDequantize; passed by value to the CUDA
/// kernels).
struct Layout {
  int bits = 8;
  int qmax = 127;
  int64_t block = 1; ///< elements per block (at most the chunk's)
  int64_t chunks = 1;
  int64_t m = 0;              ///< elements per chunk
  int64_t blocksPerChunk = 0; ///< B = ceil(m / block)
  int64_t bytesPerChunk = 0;  ///< D = m (int8) or ceil(m / 2) (int4)
  /// Blocks per unit of work: two when int4 blocks have an odd length, so
  /// that every unit starts at an even element of its chunk and no two units
  /// share a packed byte.
  int64_t blocksPerUnit = 1;
  int64_t unitsPerChunk = 0;

  /// Most elements one unit covers.
  ZRT_HD int64_t unitElements() const {
    return blocksPerUnit * block < m ? blocksPerUnit * block : m;
  }
};

/// True when the bits of a block's max|x| are those of an inf or a NaN.
ZRT_HD inline bool nonFinite(uint32_t maxAbsBits) {
  return maxAbsBits >= kNonFiniteBits;
}

/// scale = f32(max|x| / qmax) from the (finite) bits of max|x|; 0 for an
/// all-zero block.
ZRT_HD inline float blockScale(uint32_t maxAbsBits, int qmax) {
  return float(double(fromBits(maxAbsBits)) / double(qmax));
}

/// q = clamp(nearbyint(double(x) / scale), -qmax, qmax) for a nonzero scale.
/// Clamping first is the same: rounding is monotonic and keeps integers.
ZRT_HD inline int8_t quantizeNonzero(float x, double scale, double qmax) {
  double v = double(x) / scale;
  v = v < -qmax ? -qmax : v;
  v = v > qmax ? qmax : v;
  return int8_t(int32_t((v + kRoundMagic) - kRoundMagic));
}

/// q for any scale: 0 when the scale is 0 (an all-zero block).
ZRT_HD inline int8_t quantizeValue(float x, float scale, int qmax) {
  return scale == 0.0f ? int8_t(0)
                       : quantizeNonzero(x, double(scale), double(qmax));
}

/// y = f32(q * scale) (the product is exact in double), saturated to the
/// largest finite f32: 127 times the scale of a block holding FLT_MAX
/// rounds up to inf.
ZRT_HD inline float dequantizeValue(int8_t q, double scale) {
  const float v = float(double(q) * scale);
  const float lo = v < -FLT_MAX ? -FLT_MAX : v;
  return lo > FLT_MAX ? FLT_MAX : lo;
}

/// Two's-complement nibbles: element 2j in the low nibble of byte j, 2j+1 in
/// the high one.
ZRT_HD inline uint8_t packNibbles(int8_t lo, int8_t hi) {
  return uint8_t((uint8_t(lo) & 0x0f) | uint8_t(uint8_t(hi) << 4));
}

/// The inverse of packNibbles; (n ^ 8) - 8 sign-extends a nibble n.
ZRT_HD inline int8_t lowNibble(uint8_t byte) {
  return int8_t(((byte & 0x0f) ^ 8) - 8);
}
ZRT_HD inline int8_t highNibble(uint8_t byte) {
  return int8_t(((byte >> 4) ^ 8) - 8);
}

} // namespace qmath
} // namespace zrt

#endif // ZRT_MATH_QUANTIZEMATH_H
