//===- GradientRules.h - Reverse rules of the onnx ops ----------*- C++ -*-===//
//
// zero-autodiff's rule table: for each onnx op, how the gradients of its
// operands follow from the gradients of its results. Rules build onnx ops
// (static shapes, types inferred), so the backward pass runs on the same
// kernels, memory plan and ZeRO passes as the forward pass. Internal to
// lib/Transforms/Training.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_LIB_TRANSFORMS_TRAINING_GRADIENTRULES_H
#define ZERO_LIB_TRANSFORMS_TRAINING_GRADIENTRULES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <vector>

namespace zero {
namespace autodiff {

/// What a rule sees: the builder (insertion point after everything built so
/// far, location of the forward op), the op, the gradient of each result
/// (null: none reaches the loss; only multi-result ops see nulls) and which
/// operands need a gradient. It sets `dIns[i]` (sized to the operands) for
/// every needed operand, to a value of the operand's type; null means zero.
struct RuleArgs {
  mlir::ImplicitLocOpBuilder &b;
  mlir::Operation *op;
  llvm::ArrayRef<mlir::Value> dOuts;
  llvm::ArrayRef<bool> needs;
  llvm::SmallVectorImpl<mlir::Value> &dIns;
};

using RuleFn = mlir::LogicalResult (*)(RuleArgs &args);

/// The rule of an op ("onnx.MatMul"), or null.
RuleFn lookupRule(llvm::StringRef opName);

/// Every op with a rule, sorted (docs and tests).
std::vector<llvm::StringRef> ruleNames();

} // namespace autodiff
} // namespace zero

#endif // ZERO_LIB_TRANSFORMS_TRAINING_GRADIENTRULES_H
