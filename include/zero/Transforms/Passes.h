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

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace zero {

/// The largest data-parallel world a program is compiled for. Every per-rank
/// table (groups, shard offsets) grows with it, so it is bounded.
constexpr int64_t kMaxWorldSize = 65536;

/// The end of a phase that zero-verify checks (see Passes.td).
enum class VerifyPhase { Imported, Sharded, Lowered };

#define GEN_PASS_DECL
#include "zero/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "zero/Transforms/Passes.h.inc"

} // namespace zero

#endif // ZERO_TRANSFORMS_PASSES_H
