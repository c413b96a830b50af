//===- ActivationCheckpoint.cpp - zero-activation-checkpoint --------------===//
//
// Activation checkpointing over the model's layers (DeepSpeed's
// PipelineModule activation_checkpoint_interval): each micro-batch's backward
// recomputes a segment's forward from the segment's kept inputs instead of
// reading the activations its forward made, so those die when the segment's
// forward ends.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/ZeroAttributes.h"
#include "zero/Transforms/Analysis/Layers.h"

#include "zero/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#include <map>

#define DEBUG_TYPE "zero-activation-checkpoint"

namespace zero {
#define GEN_PASS_DEF_ZEROACTIVATIONCHECKPOINTPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
namespace attrs = ::zero::attrs;

namespace {

/// The part of a training step an op belongs to, if tagged.
std::optional<attrs::Phase> phaseOf(Operation *op) {
  return attrs::kPhase.get(op);
}

/// The micro-batch of a tagged op.
int64_t microBatchOf(Operation *op) { return attrs::kMicroBatch.get(op).getInt(); }

/// A checkpointed segment of one micro-batch's forward: (micro-batch,
/// layer / interval).
using SegmentKey = std::pair<int64_t, int64_t>;

struct ZeroActivationCheckpointPass
    : public ::zero::impl::ZeroActivationCheckpointPassBase<ZeroActivationCheckpointPass> {
  using Base::Base;
  // A clone counts its own statistics (the options are copied by clonePass).
  ZeroActivationCheckpointPass(const ZeroActivationCheckpointPass &other) : Base(other) {}

  Statistic numSegments{this, "segments-recomputed",
                        "Forward segments (per micro-batch) backward recomputes"};
  Statistic numRecomputed{this, "ops-recomputed", "Forward ops cloned into backward"};

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>("train_step");
    if (!func) {
      module.emitError("zero-activation-checkpoint: no @train_step; run zero-autodiff "
                       "first (zero-opt --train)");
      return signalPassFailure();
    }
    if (interval < 1) {
      module.emitError() << "zero-activation-checkpoint: interval must be >= 1, got "
                         << int64_t(interval);
      return signalPassFailure();
    }
    if (failed(checkTagged(func)))
      return signalPassFailure();
    ::zero::LayerStructure ls = ::zero::recoverLayers(func);
    if (ls.layers.empty()) {
      func.emitError("zero-activation-checkpoint: the model records no module paths, "
                     "so it has no layers to checkpoint");
      return signalPassFailure();
    }
    Block &body = func.getBody().front();
    for (auto &[key, fwd] : forwardSegments(body, ls))
      recomputeSegment(body, key, fwd);
    OpBuilder b(module.getContext());
    attrs::kActivationCheckpointInterval.set(module, b.getI64IntegerAttr(interval));
  }

  /// The training step's ops carry their micro-batch and phase (zero-autodiff
  /// tag-micro-batches=true).
  LogicalResult checkTagged(func::FuncOp func) {
    bool tagged = false;
    for (Operation &op : func.getBody().front())
      tagged |= attrs::kPhase.isSetOn(&op);
    if (tagged)
      return success();
    func.emitError("zero-activation-checkpoint: the training step's ops carry no "
                   "micro-batch tags; build it with zero-autodiff "
                   "tag-micro-batches=true (zero-opt --train does)");
    return failure();
  }

  /// Per (micro-batch, segment of `interval` layers): its forward ops, in
  /// program order.
  std::map<SegmentKey, SmallVector<Operation *>>
  forwardSegments(Block &body, const ::zero::LayerStructure &ls) {
    std::map<SegmentKey, SmallVector<Operation *>> segments;
    for (Operation &op : body) {
      auto it = ls.layerOf.find(&op);
      if (it == ls.layerOf.end() || phaseOf(&op) != attrs::Phase::Forward)
        continue;
      segments[{microBatchOf(&op), int64_t(it->second) / interval}].push_back(&op);
    }
    return segments;
  }

  /// The segment's ops that the backward ops of its micro-batch read, with
  /// what they need within the segment, cloned in order right before the
  /// first such reader, as backward work; the readers then read the clones.
  void recomputeSegment(Block &body, SegmentKey key, ArrayRef<Operation *> fwd) {
    // The backward ops of this micro-batch that read the segment's values.
    llvm::SetVector<Operation *> readers;
    for (Operation *op : fwd)
      for (Operation *user : op->getUsers())
        if (user->getBlock() == &body &&
            phaseOf(user) == attrs::Phase::Backward &&
            microBatchOf(user) == key.first)
          readers.insert(user);
    if (readers.empty())
      return;
    Operation *first = readers.front();
    for (Operation *r : readers)
      if (r->isBeforeInBlock(first))
        first = r;
    // The segment's ops those values need, within the segment.
    llvm::DenseSet<Operation *> inSegment(fwd.begin(), fwd.end()), needed;
    SmallVector<Operation *> work;
    for (Operation *r : readers)
      for (Value v : r->getOperands())
        if (Operation *d = v.getDefiningOp(); d && inSegment.contains(d))
          work.push_back(d);
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      if (!needed.insert(op).second)
        continue;
      for (Value v : op->getOperands())
        if (Operation *d = v.getDefiningOp(); d && inSegment.contains(d))
          work.push_back(d);
    }
    OpBuilder b(first);
    IRMapping map;
    for (Operation *op : fwd) {
      if (!needed.contains(op))
        continue;
      Operation *copy = b.clone(*op, map);
      attrs::kPhase.set(copy, attrs::Phase::Backward);
      attrs::kRecompute.set(copy, b.getUnitAttr());
      ++numRecomputed;
    }
    ++numSegments;
    LLVM_DEBUG(llvm::dbgs() << "zero-activation-checkpoint: micro-batch " << key.first
                            << " segment " << key.second << ": " << needed.size()
                            << " ops recomputed for " << readers.size() << " readers\n");
    for (Operation *r : readers)
      for (OpOperand &use : r->getOpOperands())
        if (Value v = map.lookupOrNull(use.get()))
          use.set(v);
  }
};

} // namespace
