//===- ActivationCheckpoint.cpp - zero-activation-checkpoint --------------===//
//
// Activation checkpointing over the model's layers (DeepSpeed's
// PipelineModule activation_checkpoint_interval): each micro-batch's backward
// recomputes a segment's forward from the segment's kept inputs instead of
// reading the activations its forward made, so those die when the segment's
// forward ends.
//
//===----------------------------------------------------------------------===//

#include "zero/Transforms/Analysis/Layers.h"

#include "zero/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <map>

namespace zero {
#define GEN_PASS_DEF_ZEROACTIVATIONCHECKPOINTPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;

namespace {

struct ZeroActivationCheckpointPass
    : public ::zero::impl::ZeroActivationCheckpointPassBase<ZeroActivationCheckpointPass> {
  using Base::Base;

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
    Block &body = func.getBody().front();
    bool tagged = false;
    for (Operation &op : body)
      tagged |= op.hasAttr("zero.phase");
    if (!tagged) {
      func.emitError("zero-activation-checkpoint: the training step's ops carry no "
                     "micro-batch tags; build it with zero-autodiff "
                     "tag-micro-batches=true (zero-opt --train does)");
      return signalPassFailure();
    }
    ::zero::LayerStructure ls = ::zero::recoverLayers(func);
    if (ls.layers.empty()) {
      func.emitError("zero-activation-checkpoint: the model records no module paths, "
                     "so it has no layers to checkpoint");
      return signalPassFailure();
    }
    // Per (micro-batch, segment): its forward ops, in program order.
    auto phaseOf = [](Operation *op) -> StringRef {
      auto p = op->getAttrOfType<StringAttr>("zero.phase");
      return p ? p.getValue() : StringRef();
    };
    auto microOf = [](Operation *op) {
      return op->getAttrOfType<IntegerAttr>("zero.micro_batch").getInt();
    };
    std::map<std::pair<int64_t, int64_t>, SmallVector<Operation *>> segments;
    llvm::DenseMap<Operation *, std::pair<int64_t, int64_t>> segmentOf;
    for (Operation &op : body) {
      auto it = ls.layerOf.find(&op);
      if (it == ls.layerOf.end() || phaseOf(&op) != "forward")
        continue;
      std::pair<int64_t, int64_t> key{microOf(&op), int64_t(it->second) / interval};
      segments[key].push_back(&op);
      segmentOf[&op] = key;
    }
    OpBuilder b(module.getContext());
    int64_t recomputed = 0;
    for (auto &[key, fwd] : segments) {
      // The backward ops of this micro-batch that read the segment's values.
      llvm::SetVector<Operation *> readers;
      for (Operation *op : fwd)
        for (Operation *user : op->getUsers())
          if (user->getBlock() == &body && phaseOf(user) == "backward" &&
              microOf(user) == key.first)
            readers.insert(user);
      if (readers.empty())
        continue;
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
      // Cloned in order right before the first reader, as backward work.
      b.setInsertionPoint(first);
      IRMapping map;
      for (Operation *op : fwd) {
        if (!needed.contains(op))
          continue;
        Operation *copy = b.clone(*op, map);
        copy->setAttr("zero.phase", b.getStringAttr("backward"));
        copy->setAttr("zero.recompute", b.getUnitAttr());
        ++recomputed;
      }
      for (Operation *r : readers)
        for (OpOperand &use : r->getOpOperands())
          if (Value v = map.lookupOrNull(use.get()))
            use.set(v);
    }
    module->setAttr("zero.activation_checkpoint_interval",
                    b.getI64IntegerAttr(interval));
    (void)recomputed;
  }
};

} // namespace
