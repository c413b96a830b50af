//===- GatherPlan.h - What the ZeRO passes know about gathers ---*- C++ -*-===//
//
// The release, prefetch, bucket and report passes all reason about the same
// things: which ops gather parameters, how many bytes each brings in, and the
// parameter views (unpad slice, reshape) through which compute uses them.
// Internal to lib/Transforms.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_LIB_TRANSFORMS_GATHERPLAN_H
#define ZERO_LIB_TRANSFORMS_GATHERPLAN_H

#include "zero/Dialect/ONNX/ONNXDialect.h"
#include "zero/Dialect/Zero/ZeroDialect.h"

#include "mlir/IR/Block.h"
#include "llvm/ADT/SmallVector.h"

namespace zero {

/// True for ops that gather parameter shards (single or bucketed).
inline bool isGather(mlir::Operation *op) {
  return llvm::isa<dist::AllGatherOp, dist::BucketAllGatherOp>(op);
}

/// Bytes of a ranked tensor type.
int64_t tensorBytes(mlir::Type type);

/// Bytes a gather op brings into memory (the sum of its results).
int64_t gatheredBytes(mlir::Operation *gather);

/// True for the free views the partitioner puts on a gathered parameter (the
/// unpad Slice and the Reshape back to the parameter's shape) when `op` is
/// one of them, i.e. its operand is a gathered value or a view of one.
bool isParameterView(mlir::Operation *op);

/// The values compute sees for one gathered result: the result itself and the
/// views the partitioner put on it (unpad Slice, Reshape), transitively.
llvm::SmallVector<mlir::Value> parameterViews(mlir::Value gathered);

/// The first op in `block` (in order) that uses any view of any result of
/// `gather` other than the view chain itself; null if none.
mlir::Operation *firstUse(mlir::Operation *gather);

/// The last such op; null if none.
mlir::Operation *lastUse(mlir::Operation *gather);

} // namespace zero

#endif // ZERO_LIB_TRANSFORMS_GATHERPLAN_H
