//===- QuantizeLayout.h - Quantize/Dequantize operand checks ----*- C++ -*-===//
//
// The host-side half of Quantize / Dequantize that every backend shares: the
// attributes, the sizes they give, the operand checks and the non-finite
// error message (docs/kernels.md, "Quantization"). Implemented in
// Quantize.cpp; the CUDA backend calls the same functions before launching
// its kernels (cuda/QuantizeKernels.cu). The arithmetic is in
// math/QuantizeMath.h.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_KERNELS_QUANTIZELAYOUT_H
#define ZRT_KERNELS_QUANTIZELAYOUT_H

#include "math/QuantizeMath.h"
#include "zrt/Kernel.h"

#include <cstdint>
#include <vector>

namespace zrt {
namespace kernels {

/// The sizes of one instruction (math/QuantizeMath.h).
using QuantizeLayout = qmath::Layout;

/// Checks Quantize's operands (x -> data, scales) and attributes; fills `l`.
Status prepareQuantize(const std::vector<TensorRef> &in,
                       const std::vector<TensorRef> &out, const AttrMap &attrs,
                       QuantizeLayout &l);

/// Checks Dequantize's operands (data, scales -> y) and attributes; fills `l`.
Status prepareDequantize(const std::vector<TensorRef> &in,
                         const std::vector<TensorRef> &out,
                         const AttrMap &attrs, QuantizeLayout &l);

/// Quantize's error for x's non-finite element `index` of value `x`.
Status quantizeNonFiniteError(const QuantizeLayout &l, int64_t index, float x);

} // namespace kernels
} // namespace zrt

#endif // ZRT_KERNELS_QUANTIZELAYOUT_H
