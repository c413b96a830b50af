//===- Quantization.h - ZeRO++'s quantize and dequantize ops ----*- C++ -*-===//
//
// What zero-quantize-gather (qwZ) and zero-quantize-reduce (qgZ) both build:
// zero.quantize / zero.dequantize of flat f32 tensors, placed on the
// communication stream. Internal to lib/Transforms/ZeRO.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_LIB_TRANSFORMS_ZERO_QUANTIZATION_H
#define ZERO_LIB_TRANSFORMS_ZERO_QUANTIZATION_H

#include "zero/Dialect/Zero/ZeroDialect.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace zero {
namespace quantization {

/// Marks an op the passes add for a collective's packing: the lowering runs
/// it on the communication stream, so compute never waits for it.
void onCommStream(mlir::Operation *op);

/// Checks a pass's bits (8 or 4) and block (>= 1) options, with an error on
/// `root` naming `pass`.
mlir::LogicalResult checkBitsBlock(mlir::Operation *root, llvm::StringRef pass,
                                   int64_t bits, int64_t block);

/// zero.quantize of flat f32 `x` in `chunks` chunks.
dist::QuantizeOp quantize(mlir::ImplicitLocOpBuilder &b, mlir::Value x, int64_t bits,
                          int64_t block, int64_t chunks);

/// zero.dequantize of `n` values from `data` and `scales`.
mlir::Value dequantize(mlir::ImplicitLocOpBuilder &b, mlir::Value data,
                       mlir::Value scales, int64_t n, int64_t bits, int64_t block,
                       int64_t chunks);

/// Whether a ranked tensor type holds f32.
bool isF32(mlir::Type t);

} // namespace quantization
} // namespace zero

#endif // ZERO_LIB_TRANSFORMS_ZERO_QUANTIZATION_H
