//===- Partition.cpp - ZeRO-3 parameter partitioning ----------------------===//
//
// zero-partition: each parameter above the persistence threshold becomes its
// flat shard (flatten, zero-pad to a multiple of dp, rank r owns [r*s,(r+1)*s))
// and every load of it becomes shard load -> zero.all_gather -> unpad Slice ->
// Reshape. This is DeepSpeed's ZeRO-3 rule (partition_parameters.py), fixed
// at compile time: the per-rank layout is the same on every rank by
// construction. Buffers (zero.buffer) are not parameters and stay whole, as
// DeepSpeed keeps a module's buffers on every rank.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/ZeroAttributes.h"
#include "zero/Transforms/Analysis/ShardLayout.h"

#include "zero/Transforms/Passes.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace zero {
#define GEN_PASS_DEF_ZEROPARTITIONPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
namespace attrs = ::zero::attrs;

namespace {

struct ZeroPartitionPass
    : public ::zero::impl::ZeroPartitionPassBase<ZeroPartitionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!::zero::isSupportedWorldSize(dp)) {
      module.emitError() << "zero-partition: dp must be between 1 and "
                         << ::zero::kMaxWorldSize << " (the ranks of one "
                         << "data-parallel group), got " << int64_t(dp);
      return signalPassFailure();
    }
    // A training step (zero-optimizer's): its gradient averaging and optimizer
    // state partitioning were compiled by zero-optimizer{world stage}; here the
    // module records them, and stage 3 partitions the parameters too.
    bool training = attrs::kTraining.isSetOn(module);
    if (training) {
      OpBuilder b(module.getContext());
      auto compiled = attrs::kWorldSize.get(module);
      int64_t world = compiled ? compiled.getInt() : 1;
      if (world != dp) {
        module.emitError() << "zero-partition: the training step was compiled for "
                           << world << " rank(s) (zero-optimizer world=" << world
                           << "), not dp=" << int64_t(dp)
                           << "; give the world size once, to zero-opt --train";
        return signalPassFailure();
      }
      auto compiledStage = attrs::kStage.get(module);
      if (dp > 1 && (stage == 3) != (compiledStage && compiledStage.getInt() == 3)) {
        module.emitError() << "zero-partition: the training step was compiled for stage "
                           << (compiledStage ? compiledStage.getInt() : 0)
                           << " (zero-optimizer stage), not stage " << int64_t(stage)
                           << "; give the stage once, to zero-opt --train";
        return signalPassFailure();
      }
      attrs::kWorldSize.set(module, b.getI64IntegerAttr(dp));
      attrs::kStage.set(module, b.getI64IntegerAttr(stage));
      if (stage != 3 || dp == 1)
        return;
    }
    if (stage == 1 || stage == 2) {
      module.emitError()
          << "zero-partition: stage " << int64_t(stage)
          << " partitions optimizer state"
          << (stage == 2 ? " and gradients" : "")
          << ", which this program does not have: it is a forward (inference) "
             "program (compile with zero-opt --train for a training step); use "
             "stage=3 to partition parameters, or stage=0 to replicate them";
      return signalPassFailure();
    }
    if (stage != 0 && stage != 3) {
      module.emitError() << "zero-partition: stage must be 0, 1, 2 or 3, got " << int64_t(stage);
      return signalPassFailure();
    }
    if (persistenceThreshold < 0) {
      module.emitError() << "zero-partition: persistence-threshold must be >= 0";
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    attrs::kWorldSize.set(module, b.getI64IntegerAttr(dp));
    attrs::kStage.set(module, b.getI64IntegerAttr(stage));
    if (stage == 0)
      return;

    int64_t inCpu = 0; // offload_param: shard elements so far
    for (auto global : module.getOps<ml_program::GlobalOp>()) {
      auto type = dyn_cast<RankedTensorType>(global.getType());
      // Optimizer state is partitioned by zero-optimizer; counters are scalars.
      // Buffers (zero.buffer: registered buffers, running statistics, what the
      // exporter folded from them, such as an additive causal mask of -inf)
      // are not parameters: DeepSpeed partitions parameters only and every
      // rank keeps its buffers whole. So none is ever gathered, and qwZ,
      // which quantizes gathers, never sees one (a -inf has no scale).
      if (!type || attrs::kShard.isSetOn(global) || attrs::kRole.isSetOn(global) ||
          attrs::kBuffer.isSetOn(global))
        continue;
      int64_t numel = type.getNumElements();
      if (numel <= persistenceThreshold)
        continue;
      int64_t padded = ::zero::paddedNumel(numel, dp);
      int64_t shardNumel = padded / dp;
      auto shardType = RankedTensorType::get({shardNumel}, type.getElementType());
      global.setType(shardType);
      global.setValueAttr(ml_program::ExternAttr::get(b.getContext(), shardType));
      attrs::kFullType.set(global, TypeAttr::get(type));
      // offload_param: device cpu puts every shard in host memory; nvme
      // (as DeepSpeed) keeps the first max_in_cpu elements of the shards in
      // host memory and swaps the rest, each into a buffer of buffer_size
      // elements.
      if (offloadHost)
        attrs::kOffload.set(global, attrs::OffloadDevice::Cpu);
      else if (!nvmePath.empty() && (inCpu += shardNumel) > int64_t(maxInCpu)) {
        if (shardNumel > int64_t(bufferSize)) {
          global.emitError() << "zero_optimization.offload_param.buffer_size " << int64_t(bufferSize)
                             << " is smaller than this parameter's shard (" << shardNumel
                             << " elements): raise buffer_size to at least " << shardNumel
                             << " (each shard swapped in takes one buffer), or max_in_cpu "
                                "to keep it in host memory";
          return signalPassFailure();
        }
        attrs::kOffload.set(global, attrs::OffloadDevice::Nvme);
      }
      attrs::kShard.set(global, ::zero::dist::ShardAttr::get(b.getContext(), dp,
                                                             numel, padded));
      auto uses = SymbolTable::getSymbolUses(global, module);
      if (!uses)
        continue;
      for (const SymbolTable::SymbolUse &use : *uses) {
        auto load = dyn_cast<ml_program::GlobalLoadOp>(use.getUser());
        if (!load)
          continue;
        // Compute keeps using the parameter; only its producer changes.
        SmallVector<OpOperand *> computeUses;
        for (OpOperand &u : load.getResult().getUses())
          computeUses.push_back(&u);
        ImplicitLocOpBuilder lb(load.getLoc(), b);
        lb.setInsertionPointAfter(load);
        load.getResult().setType(shardType);
        Value full = ::zero::gatherWhole(lb, load.getResult(), type, dp);
        for (OpOperand *u : computeUses)
          u->set(full);
      }
    }
    if (!nvmePath.empty() && !attrs::kOffloadConfig.get(module))
      attrs::kOffloadConfig.set(
          module, ::zero::dist::OffloadConfigAttr::get(b.getContext(), nvmePath,
                                                       offloadBuffers));
    if (training)
      foldOptimizerShards(module);
    if (maxReuseDistance >= 0)
      for (auto func : module.getOps<func::FuncOp>())
        splitDistantUses(func);
  }

  /// Erases `op` and, walking back through its operands, every op left
  /// without uses among `chain` (a gather chain nothing else reads).
  static void eraseDeadChain(Operation *op) {
    SmallVector<Operation *> work{op};
    while (!work.empty()) {
      Operation *o = work.pop_back_val();
      if (!o->use_empty())
        continue;
      SmallVector<Operation *> defs;
      for (Value v : o->getOperands())
        if (Operation *d = v.getDefiningOp())
          defs.push_back(d);
      o->erase();
      for (Operation *d : defs)
        if (isa<::zero::dist::AllGatherOp, ::zero::onnx::SliceOp, ::zero::onnx::ReshapeOp,
                ::zero::onnx::PadOp, ml_program::GlobalLoadOp>(d))
          work.push_back(d);
    }
  }

  /// The sharded global `v` was loaded from and gathered whole through
  /// (load -> all_gather -> [Slice] -> [Reshape]), or null.
  static ::zero::dist::AllGatherOp gatherOf(Value v) {
    Operation *d = v.getDefiningOp();
    while (d && isa<::zero::onnx::ReshapeOp, ::zero::onnx::SliceOp, ::zero::onnx::PadOp>(d))
      d = d->getOperand(0).getDefiningOp();
    return dyn_cast_or_null<::zero::dist::AllGatherOp>(d);
  }

  /// A stage-3 training step: zero-optimizer stepped the rank's shard of each
  /// replicated parameter (zero.local_shard of the flat padded parameter) and
  /// gathered the update back (zero.all_gather -> Slice -> Reshape -> store).
  /// Now that the parameter global is that shard, the shard is the load and
  /// the update is stored as is: both gathers disappear.
  void foldOptimizerShards(ModuleOp module) {
    SmallVector<::zero::dist::LocalShardOp> shards;
    module.walk([&](::zero::dist::LocalShardOp s) { shards.push_back(s); });
    for (auto shard : shards) {
      auto gather = gatherOf(shard.getInput());
      auto load = gather ? gather.getShard().getDefiningOp<ml_program::GlobalLoadOp>() : nullptr;
      if (!load || load.getType() != shard.getType())
        continue;
      shard.getResult().replaceAllUsesWith(load.getResult());
      eraseDeadChain(shard);
    }
    SmallVector<ml_program::GlobalStoreOp> stores;
    module.walk([&](ml_program::GlobalStoreOp s) { stores.push_back(s); });
    for (auto store : stores) {
      auto global = SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(
          store, store.getGlobalAttr());
      if (!global || !attrs::kShard.isSetOn(global) || attrs::kRole.isSetOn(global))
        continue;
      auto gather = gatherOf(store.getValue());
      if (!gather || gather.getShard().getType() != global.getType())
        continue;
      Operation *old = store.getValue().getDefiningOp();
      store.getValueMutable().assign(gather.getShard());
      eraseDeadChain(old);
    }
  }

  /// Gives a use its own gather when more than maxReuseDistance parameter
  /// elements are gathered between it and the previous use, so the copy can be
  /// released in between. Walks each gather's uses in order.
  void splitDistantUses(func::FuncOp func) {
    Block &block = func.getBody().front();
    // Parameter elements gathered before each op: a prefix sum over the block.
    llvm::DenseMap<Operation *, int64_t> gatheredBefore;
    int64_t running = 0;
    SmallVector<::zero::dist::AllGatherOp> gathers;
    for (Operation &op : block) {
      gatheredBefore[&op] = running;
      if (auto g = dyn_cast<::zero::dist::AllGatherOp>(op)) {
        running += g.getType().getNumElements();
        gathers.push_back(g);
      }
    }
    OpBuilder b(func.getContext());
    for (auto gather : gathers) {
      // The chain load -> gather -> [slice] -> [reshape]; compute uses the end.
      Operation *end = gather;
      while (end->hasOneUse() &&
             isa<::zero::onnx::SliceOp, ::zero::onnx::ReshapeOp>(*end->getUsers().begin()))
        end = *end->getUsers().begin();
      Value param = end->getResult(0);
      SmallVector<Operation *> users;
      for (Operation *u : param.getUsers()) {
        while (u->getBlock() != &block)
          u = u->getParentOp();
        if (!llvm::is_contained(users, u))
          users.push_back(u);
      }
      llvm::sort(users, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
      Value current = param;
      for (size_t i = 1; i < users.size(); ++i) {
        int64_t between = gatheredBefore[users[i]] - gatheredBefore[users[i - 1]];
        if (between <= maxReuseDistance)
          continue;
        // Clone the chain right before users[i]; it and the later users switch.
        b.setInsertionPoint(users[i]);
        IRMapping map;
        Operation *load = gather.getShard().getDefiningOp();
        b.clone(*load, map);
        for (Operation *op = gather; op != nullptr;
             op = op == end ? nullptr : *op->getUsers().begin())
          b.clone(*op, map);
        Value copy = map.lookup(param);
        for (size_t j = i; j < users.size(); ++j)
          users[j]->replaceUsesOfWith(current, copy);
        current = copy;
      }
    }
  }
};

} // namespace
