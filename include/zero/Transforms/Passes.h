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

/// The largest data-parallel world a program is compiled for. Every per-rank
/// table (groups, shard offsets) grows with it, so it is bounded.
constexpr int64_t kMaxWorldSize = 65536;

#define GEN_PASS_DECL
#include "zero/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "zero/Transforms/Passes.h.inc"

} // namespace zero

#endif // ZERO_TRANSFORMS_PASSES_H

#ifndef ZERO_TRANSFORMS_PIPELINE_H
#define ZERO_TRANSFORMS_PIPELINE_H

#include "mlir/Pass/PassManager.h"

#include <string>
#include <vector>

namespace zero {

/// The ZeRO configuration, whether it came from --zero-pipeline or from a
/// DeepSpeed JSON config. Sizes are in bytes here (DeepSpeed counts elements;
/// the config reader converts with 4 bytes per fp32 element).
struct ZeroPipelineOptions {
  int64_t stage = 3;
  int64_t dp = -1; ///< -1: not given
  int64_t prefetchDepth = 0;
  int64_t prefetchBytes = 0;
  int64_t bucketBytes = 0;
  int64_t persistenceThreshold = 0; ///< elements
  int64_t maxReuseDistance = -1;    ///< elements; -1: never re-gather
  bool any = false;                 ///< some option was given
};

/// Parses "stage=3 dp=4 prefetch=2 prefetch-bytes=.. bucket-bytes=..
/// persistence-threshold=.. max-reuse-distance=.." (space or comma
/// separated) into `opts`.
/// Returns an error message, empty on success.
std::string parseZeroPipelineOptions(llvm::StringRef spec, ZeroPipelineOptions &opts);

/// Reads DeepSpeed's keys from a JSON config into `opts`: zero_optimization.
/// {stage, stage3_prefetch_bucket_size, stage3_param_persistence_threshold,
/// stage3_max_live_parameters, stage3_max_reuse_distance, reduce_bucket_size,
/// allgather_bucket_size}.
/// Keys it does not use are reported in `warnings`. Returns an error message
/// (naming the file and key), empty on success.
std::string readDeepSpeedConfig(llvm::StringRef path, ZeroPipelineOptions &opts,
                                std::vector<std::string> &warnings);

/// Adds zero-partition, zero-bucket, zero-prefetch and zero-release.
void buildZeroPipeline(mlir::OpPassManager &pm, const ZeroPipelineOptions &opts);

} // namespace zero

#endif // ZERO_TRANSFORMS_PIPELINE_H
