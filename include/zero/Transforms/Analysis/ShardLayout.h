//===- ShardLayout.h - DeepSpeed's flatten-pad-split rule -------*- C++ -*-===//
//
// One parameter (or its gradient) over N ranks: flattened, zero-padded to a
// multiple of N, rank r owning elements [r*s, (r+1)*s), s = padded / N. Used
// by zero-optimizer (gradient reduce-scatter, optimizer-state shards) and
// zero-reduce-micro-steps (ZeRO-2 micro-step reduce-scatter); zero-partition applies the
// same rule to parameters.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_TRANSFORMS_ANALYSIS_SHARDLAYOUT_H
#define ZERO_TRANSFORMS_ANALYSIS_SHARDLAYOUT_H

#include "zero/Dialect/ONNX/ONNXDialect.h"
#include "zero/Dialect/Zero/ZeroDialect.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace zero {

/// `numel` rounded up to a multiple of `world`.
inline int64_t paddedNumel(int64_t numel, int64_t world) {
  return (numel + world - 1) / world * world;
}

/// `v` flattened and zero-padded to `padded` elements.
inline mlir::Value flatPadded(mlir::ImplicitLocOpBuilder &b, mlir::Value v, int64_t padded) {
  auto t = mlir::cast<mlir::RankedTensorType>(v.getType());
  int64_t numel = t.getNumElements();
  if (t.getRank() != 1)
    v = onnx::ReshapeOp::create(b, v, llvm::ArrayRef<int64_t>{numel});
  if (padded != numel)
    v = onnx::PadOp::create(b, v, llvm::ArrayRef<int64_t>{0, padded - numel}, "constant",
                            llvm::APFloat(0.0));
  return v;
}

/// The whole parameter of type `full` back from this rank's `shard` (the
/// inverse of flatPadded and the split): the world's shards all-gathered,
/// the padding sliced off, the result reshaped.
inline mlir::Value gatherWhole(mlir::ImplicitLocOpBuilder &b, mlir::Value shard,
                               mlir::RankedTensorType full, int64_t world) {
  int64_t numel = full.getNumElements();
  int64_t padded = paddedNumel(numel, world);
  mlir::Value v = dist::AllGatherOp::create(
      b, mlir::RankedTensorType::get({padded}, full.getElementType()), shard, world);
  if (padded != numel)
    v = onnx::SliceOp::create(b, v, llvm::ArrayRef<int64_t>{0},
                              llvm::ArrayRef<int64_t>{numel}, llvm::ArrayRef<int64_t>{1});
  if (full.getRank() != 1)
    v = onnx::ReshapeOp::create(b, v, full.getShape());
  return v;
}

} // namespace zero

#endif // ZERO_TRANSFORMS_ANALYSIS_SHARDLAYOUT_H
