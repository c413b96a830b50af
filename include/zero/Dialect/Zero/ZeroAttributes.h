//===- ZeroAttributes.h - The zero.* discardable attributes -----*- C++ -*-===//
//
// Every `zero.*` attribute the passes put on modules, globals and ops, named
// once: what it means, where it sits, the type of its value. Passes read and
// write them through these accessors, never through a spelled string, and
// the zero dialect verifies each one's type (ZeroDialect::verify*Attribute),
// so a pass that writes one wrongly is caught where it does.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_DIALECT_ZERO_ZEROATTRIBUTES_H
#define ZERO_DIALECT_ZERO_ZEROATTRIBUTES_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"

#include <cstdint>
#include <optional>

#include "zero/Dialect/Zero/ZeroDialect.h"
#include "zero/Dialect/Zero/ZeroEnums.h.inc"

namespace zero {
namespace attrs {

/// One discardable `zero.*` attribute whose value is an `AttrT`: its name and
/// typed access. Converts to its name where an API wants one (a function
/// result attribute, a NamedAttribute).
template <typename AttrT>
struct ZeroAttr {
  llvm::StringLiteral name;

  constexpr operator llvm::StringRef() const { return name; }
  /// The value on `op`, null when absent or of another type.
  AttrT get(mlir::Operation *op) const { return op->getAttrOfType<AttrT>(name); }
  AttrT get(mlir::Operation &op) const { return get(&op); }
  bool isSetOn(mlir::Operation *op) const { return op->hasAttr(name); }
  bool isSetOn(mlir::Operation &op) const { return isSetOn(&op); }
  void set(mlir::Operation *op, AttrT value) const { op->setAttr(name, value); }
  void remove(mlir::Operation *op) const { op->removeAttr(name); }
  /// An integer attribute's value, when present.
  std::optional<int64_t> getInt(mlir::Operation *op) const {
    if (auto v = get(op))
      return v.getInt();
    return std::nullopt;
  }
};

/// A string-valued `zero.*` attribute whose value is one of enum E's
/// spellings (ZeroEnums.td): read and written as E; the dialect refuses any
/// other string.
template <typename E> struct ZeroEnumAttr {
  llvm::StringLiteral name;

  constexpr operator llvm::StringRef() const { return name; }
  /// The value on `op`, when set to one of E's spellings.
  std::optional<E> get(mlir::Operation *op) const {
    if (auto v = getAttr(op))
      return symbolizeEnum<E>(v.getValue());
    return std::nullopt;
  }
  std::optional<E> get(mlir::Operation &op) const { return get(&op); }
  /// The attribute itself (its spelling), null when absent.
  mlir::StringAttr getAttr(mlir::Operation *op) const {
    return op->getAttrOfType<mlir::StringAttr>(name);
  }
  bool isSetOn(mlir::Operation *op) const { return op->hasAttr(name); }
  bool isSetOn(mlir::Operation &op) const { return isSetOn(&op); }
  void set(mlir::Operation *op, E value) const {
    op->setAttr(name,
                mlir::StringAttr::get(op->getContext(), stringifyEnum(value)));
  }
  void remove(mlir::Operation *op) const { op->removeAttr(name); }
};

// Module attributes.
/// Ranks the program is compiled for (every stage's replicas together).
inline constexpr ZeroAttr<mlir::IntegerAttr> kWorldSize{"zero.world_size"};
/// The ZeRO stage the program was compiled at.
inline constexpr ZeroAttr<mlir::IntegerAttr> kStage{"zero.stage"};
/// A training step's settings (optimizer, schedule) for the runtime.
inline constexpr ZeroAttr<dist::TrainingAttr> kTraining{"zero.training"};
/// Micro-batches (gradient accumulation steps) per training step.
inline constexpr ZeroAttr<mlir::IntegerAttr> kAccumulationSteps{"zero.accumulation_steps"};
/// Layers per activation-checkpointed segment.
inline constexpr ZeroAttr<mlir::IntegerAttr> kActivationCheckpointInterval{
    "zero.activation_checkpoint_interval"};
/// The pipeline split's plan: stages, their ranks and schedule.
inline constexpr ZeroAttr<dist::PipelinePlanAttr> kPipelinePlan{
    "zero.pipeline_plan"};
/// fp16 training's loss scaler (DeepSpeed's): its settings; the dynamic
/// scaler's state is in the loss_scaler.* globals (Training/LossScaler.h).
inline constexpr ZeroAttr<dist::LossScalerAttr> kLossScaler{"zero.loss_scaler"};
/// bf16 training that skips a step whose gradients are not finite (DeepSpeed
/// 0.19's bf16 check_grad_overflow, on by default): zero-optimizer keeps the
/// parameters, the optimizer state and the step count, as fp16's overflow.
inline constexpr ZeroAttr<mlir::UnitAttr> kSkipNonFinite{"zero.skip_nonfinite"};

/// A planning proxy (zero-truncate-layers): the repeated blocks the model
/// had; the module keeps the first ones only.
inline constexpr ZeroAttr<mlir::IntegerAttr> kTruncatedFrom{
    "zero.truncated_from"};

// Global (parameter, buffer, optimizer state) attributes.
/// The ONNX initializer name a global holds.
inline constexpr ZeroAttr<mlir::StringAttr> kTensor{"zero.tensor"};
/// What a global the optimizer adds holds (e.g. "counter", the step count).
inline constexpr ZeroEnumAttr<GlobalRole> kRole{"zero.role"};
/// How a global is sharded over ranks (DeepSpeed's flatten-pad-split).
inline constexpr ZeroAttr<dist::ShardAttr> kShard{"zero.shard"};
/// The unsharded type of a sharded global.
inline constexpr ZeroAttr<mlir::TypeAttr> kFullType{"zero.full_type"};
/// A model buffer (a register_buffer, running statistics, a constant folded
/// from buffers): a float initializer that is never trained.
inline constexpr ZeroAttr<mlir::UnitAttr> kBuffer{"zero.buffer"};
/// A global zero-autodiff trains.
inline constexpr ZeroAttr<mlir::UnitAttr> kTrainable{"zero.trainable"};
/// A trained parameter's gradient as a rank holds it over the step (set by
/// zero-optimizer): the whole gradient at ZeRO stages 0 and 1, the rank's
/// reduced shard at stages 2 and 3; in the dtype it is held in.
inline constexpr ZeroAttr<mlir::TypeAttr> kGradType{"zero.grad_type"};
/// An fp32 master copy's 16-bit parameter (set by zero-optimizer on NAME.master):
/// the runtime starts the master as that parameter widened (its shard, when
/// the master is sharded), as DeepSpeed makes its fp32 copies from the
/// converted model.
inline constexpr ZeroAttr<mlir::FlatSymbolRefAttr> kWidenFrom{"zero.widen_from"};
/// Where an offloaded global lives ("nvme": a swap file, set by zero-optimizer
/// on the optimizer state with offload_optimizer device nvme); absent: memory.
inline constexpr ZeroEnumAttr<OffloadDevice> kOffload{"zero.offload"};
/// On the module: the NVMe offload settings (nvme_path, buffer_count).
inline constexpr ZeroAttr<dist::OffloadConfigAttr> kOffloadConfig{
    "zero.offload_config"};

// Op attributes.
/// The pipeline stage an op runs on.
inline constexpr ZeroAttr<mlir::IntegerAttr> kPipelineStage{"zero.pipeline_stage"};
/// The pipeline schedule step an op belongs to (e.g. "F0": the forward of
/// micro-batch 0).
inline constexpr ZeroAttr<mlir::StringAttr> kPipelineStep{"zero.pipeline_step"};
/// Which part of a training step an op belongs to ("forward", "backward").
inline constexpr ZeroEnumAttr<Phase> kPhase{"zero.phase"};
/// The micro-batch an op of a training step works on.
inline constexpr ZeroAttr<mlir::IntegerAttr> kMicroBatch{"zero.micro_batch"};
/// The stream an op runs on ("comm": the communication stream).
inline constexpr ZeroEnumAttr<StreamKind> kStream{"zero.stream"};
/// The fusion group an elementwise op belongs to (zero-fuse-elementwise):
/// zero-lower-to-runtime lowers each group to one FusedElementwise kernel at
/// its last member.
inline constexpr ZeroAttr<mlir::IntegerAttr> kFusionGroup{"zero.fusion_group"};
/// An op the source model computes in f32 whatever its operands' type: a
/// cast to f32 the export dropped (the importer marks transformers'
/// language-model losses, `logits.float()`); zero-mixed-precision keeps it f32.
inline constexpr ZeroAttr<mlir::UnitAttr> kComputeF32{"zero.compute_f32"};
/// An op activation checkpointing recomputes in backward.
inline constexpr ZeroAttr<mlir::UnitAttr> kRecompute{"zero.recompute"};
/// A reduce-scatter qgZ left unquantized (not f32, or another world): the
/// report counts it as a plain collective.
inline constexpr ZeroAttr<mlir::UnitAttr> kQgzFallback{"zero.qgz_fallback"};

// Function result attributes (a gradient output of --optimizer none).
/// The parameter a result is the gradient of.
inline constexpr ZeroAttr<mlir::FlatSymbolRefAttr> kGradOf{"zero.grad_of"};
/// The ranks a gradient result is sharded over.
inline constexpr ZeroAttr<mlir::IntegerAttr> kGradShard{"zero.grad_shard"};

} // namespace attrs
} // namespace zero

#endif // ZERO_DIALECT_ZERO_ZEROATTRIBUTES_H
