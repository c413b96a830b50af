//===- Passes.h - The zero passes -------------------------------*- C++ -*-===//
//
// Declarations and registration of every zero pass (see Passes.td). The
// passes live in lib/Transforms by concern: ZeRO/, Training/,
// PipelineParallel/ and Lowering/, over the analyses of Analysis/; the
// registered pipelines that order them are in zero/Pipelines.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_TRANSFORMS_PASSES_H
#define ZERO_TRANSFORMS_PASSES_H

#include "zero/Dialect/ONNX/ONNXDialect.h"
#include "zero/Dialect/ZRT/ZRTDialect.h"
#include "zero/Dialect/Zero/ZeroDialect.h"
#include "zero/Transforms/OptionEnums.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinOps.h"

#include "mlir/Pass/Pass.h"

#include <memory>
#include <optional>

namespace zero {

/// The largest data-parallel world a program is compiled for. Every per-rank
/// table (groups, shard offsets) grows with it, so it is bounded.
constexpr int64_t kMaxWorldSize = 65536;

/// Whether a program can be compiled for `ranks` ranks: 1 to kMaxWorldSize.
/// Every place that takes a world size checks it with this (and says, in its
/// own terms, where the number came from).
inline bool isSupportedWorldSize(int64_t ranks) {
  return ranks >= 1 && ranks <= kMaxWorldSize;
}

// The enums of the passes' options (VerifyPhase, PipelineSchedule, TiedGrads,
// LossKind, LRSchedule, WarmupType, Precision), spelled once in
// OptionEnums.td: stringifyEnum(value), symbolize<Enum>(name).
#define GEN_PASS_DECL
#include "zero/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "zero/Transforms/Passes.h.inc"

} // namespace zero

#endif // ZERO_TRANSFORMS_PASSES_H
