//===- Layers.h - The layer structure of an imported model -------*- C++ -*-===//
//
// Pipeline parallelism cuts a model between layers, as DeepSpeed's
// PipelineModule cuts its list of LayerSpecs. An exported graph has no such
// list, but its exporter recorded each node's module path (the importer keeps
// it on the op's location): the layers are the repeated blocks (a module path
// ending in an index, `transformer.h.3`) and their siblings at the same depth
// (`transformer.wte`, `transformer.ln_f`, `lm_head`), in program order. Ops
// of the enclosing modules only (the glue that computes masks and position
// ids) belong to no layer.
//
// A model that records no module paths (an exporter that keeps neither node
// names nor name_scopes metadata) is cut only where a single activation
// crosses: see `recoverLayers`. Used by the pipeline split, activation
// checkpointing, autodiff and zero-report.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_TRANSFORMS_ANALYSIS_LAYERS_H
#define ZERO_TRANSFORMS_ANALYSIS_LAYERS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>
#include <vector>

namespace zero {

/// One layer: its module path, its class (empty when the exporter did not
/// record it), the ops in it and the parameter elements they load.
struct Layer {
  std::string name;
  std::string cls;
  llvm::SmallVector<mlir::Operation *> ops;
  int64_t params = 0;
};

struct LayerStructure {
  std::vector<Layer> layers;
  /// The op's layer index; absent for glue and for ops without a module path.
  llvm::DenseMap<mlir::Operation *, int> layerOf;
  /// True when the layers are the single-activation segments of a model
  /// that records no module paths (named segment.0, segment.1, ...).
  bool segments = false;
};

/// The layers of `func` from its ops' module paths. When the exporter
/// recorded none, the segments between its single-activation cut points:
///   * an op is *free* when it is an ml_program.global_load or an
///     onnx.Constant, or when it has operands and every value it reads
///     (operands, and values its regions use from above) is free: weights
///     and what is computed from weights and constants only (a transposed
///     weight). A stage can repeat those itself; they never make a cut.
///   * between two consecutive non-free top-level ops (program order), a cut
///     point is where exactly one non-free value (a result of a non-free op
///     at or before the point) is still used after it (by a later op, or by
///     the return). The inputs themselves do not count (every rank binds
///     every input: labels read at the loss cross nothing); integer side
///     values computed from them (a mask, position ids) count like any other.
///   * the non-free ops between consecutive cut points form a segment; a
///     segment whose ops read no trainable parameter (a global without
///     zero.buffer, directly or through free ops) joins the following one
///     (trailing ones the preceding one), so every layer holds parameters;
///     with no parameters at all, the whole function is one layer.
///   * a free op belongs to the segment of its first non-free user (through
///     other free ops), else to that of the next non-free op (else the last).
/// Every top-level op but the return is in `layerOf`. The fallback needs an
/// uncut forward function: on one that already carries zero.pipeline_stage
/// or zero.phase (a training step) it finds nothing (empty result).
LayerStructure recoverLayers(mlir::func::FuncOp func);

/// DeepSpeed's partition methods (runtime/utils.py): the first layer index of
/// each of `parts` stages, then the number of layers (parts + 1 entries).
/// Uniform: as equal layer counts as possible, the first stages one larger.
std::vector<int64_t> partitionUniform(int64_t items, int64_t parts);
/// Balanced: contiguous parts minimising the spread between the heaviest and
/// the lightest part (DeepSpeed's dynamic program for the linear partition
/// problem, ties broken toward the latest cut as it does).
std::vector<int64_t> partitionBalanced(const std::vector<int64_t> &weights,
                                       int64_t parts);

/// The multiply-accumulates of a layer's forward products at the compiled
/// shapes: MatMul and Gemm (result elements x K), Conv (result elements x
/// input channels per group x kernel size). The weight of
/// zero-pipeline-split's `partition=compute`.
int64_t layerMacs(const Layer &layer);

/// One step of a pipeline stage's training schedule: micro-batch `micro`'s
/// forward or backward.
struct PipelineStep {
  bool forward = true;
  int64_t micro = 0;
};

/// Stage `stage`'s order of work for `m` micro-batches over `stages`
/// stages: "gpipe" runs every forward, then every backward; "1f1b"
/// (DeepSpeed's TrainSchedule) runs min(S - stage - 1, M) warm-up forwards,
/// then alternates one forward and one backward, then the remaining
/// backwards. Backwards go in micro-batch order in both.
std::vector<PipelineStep> pipelineSchedule(llvm::StringRef schedule, int64_t stages,
                                           int64_t stage, int64_t m);

/// The pipeline stage an op runs on: its own zero.pipeline_stage, else that
/// of the stage function holding it (zero-pipeline-split's @<name>_stage<s>);
/// nothing outside a cut program.
std::optional<int64_t> pipelineStageOf(mlir::Operation *op);

} // namespace zero

#endif // ZERO_TRANSFORMS_ANALYSIS_LAYERS_H
