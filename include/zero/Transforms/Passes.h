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

/// The end of a phase that zero-verify checks (see Passes.td).
enum class VerifyPhase { Imported, Sharded, Lowered };
/// A training step's pipeline schedule (zero-pipeline-split schedule).
enum class PipelineSchedule { OneFOneB, GPipe };
/// How a tied parameter's gradient is summed over its pipeline stages
/// (zero-pipeline-split tied-grads).
enum class TiedGrads { MicroBatch, Step };
/// zero-add-loss's loss.
enum class LossKind { CrossEntropy, CausalLM };
/// zero-optimizer's learning-rate schedule: DeepSpeed's scheduler types.
enum class LRSchedule { Constant, WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest };
/// DeepSpeed's warmup_type.
enum class WarmupType { Log, Linear };
/// Training precision: fp32, or a 16-bit forward with fp32 master weights
/// (DeepSpeed's "bf16" / "fp16"; zero-mixed-precision).
enum class Precision { FP32, BF16, FP16 };

/// The name an option value is spelled with, on the command line, in a
/// DeepSpeed config and in the IR.
llvm::StringRef stringify(PipelineSchedule schedule);
llvm::StringRef stringify(TiedGrads tiedGrads);
llvm::StringRef stringify(LossKind kind);
llvm::StringRef stringify(LRSchedule schedule);
llvm::StringRef stringify(WarmupType type);
llvm::StringRef stringify(Precision precision);
/// The value spelled `name`, if any.
std::optional<PipelineSchedule> parsePipelineSchedule(llvm::StringRef name);
std::optional<TiedGrads> parseTiedGrads(llvm::StringRef name);
std::optional<LossKind> parseLossKind(llvm::StringRef name);
std::optional<LRSchedule> parseLRSchedule(llvm::StringRef name);
std::optional<WarmupType> parseWarmupType(llvm::StringRef name);
std::optional<Precision> parsePrecision(llvm::StringRef name);

#define GEN_PASS_DECL
#include "zero/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "zero/Transforms/Passes.h.inc"

} // namespace zero

#endif // ZERO_TRANSFORMS_PASSES_H
