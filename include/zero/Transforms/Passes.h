//===- Passes.h - The zero passes -------------------------------*- C++ -*-===//
//
// Declarations and registration of every zero pass (see Passes.td), and the
// named pipeline that expands ZeRO options into the pass list.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_TRANSFORMS_PASSES_H
#define ZERO_TRANSFORMS_PASSES_H

#include "zero/Dialect/ONNX/ONNXDialect.h"
#include "zero/Dialect/ZRT/ZRTDialect.h"
#include "zero/Dialect/Zero/ZeroDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace zero {

#define GEN_PASS_DECL
#include "zero/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "zero/Transforms/Passes.h.inc"

} // namespace zero

#endif // ZERO_TRANSFORMS_PASSES_H
