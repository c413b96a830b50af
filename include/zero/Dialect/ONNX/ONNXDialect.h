//===- ONNXDialect.h - The onnx dialect -------------------------*- C++ -*-===//
//
// Declares the onnx dialect and its ops: the importer's output and the input of
// every zero pass. See ONNXOps.td for the op definitions and docs/ops.md for the
// supported ONNX operators.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_DIALECT_ONNX_ONNXDIALECT_H
#define ZERO_DIALECT_ONNX_ONNXDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "zero/Dialect/ONNX/ONNXOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "zero/Dialect/ONNX/ONNXOps.h.inc"

namespace zero::onnx {

/// Largest number of elements a folder materialises for a non-splat result.
/// Shape sub-graphs stay far below it; a model's real compute is not folded.
constexpr int64_t kMaxFoldElements = 1 << 16;

/// Evaluates `op` on constant operands. Returns null when `op` is not foldable,
/// an operand is not constant, or the result would be too large. Used by the
/// ops' fold hooks and so by the importer's shape-subgraph folding.
mlir::Attribute foldONNXOp(mlir::Operation *op,
                           llvm::ArrayRef<mlir::Attribute> operands);

} // namespace zero::onnx

#endif // ZERO_DIALECT_ONNX_ONNXDIALECT_H
