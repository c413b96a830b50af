//===- TruncateLayers.cpp - zero-truncate-layers --------------------------===//
//
// The model with only its first `keep` repeated blocks: a proxy the planner
// compiles and simulates at two depths to extrapolate a deep model's layouts
// (a stack of equal blocks costs a constant plus a per-block part). The
// blocks are Layers.h's (module paths ending in an index); the activation
// leaving block keep-1 takes the place of the one leaving the last block, the
// later blocks are erased, and so are the parameters only they read.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/ZeroAttributes.h"
#include "zero/Transforms/Analysis/Layers.h"
#include "zero/Transforms/Passes.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace zero {
#define GEN_PASS_DEF_ZEROTRUNCATELAYERSPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;

namespace {

/// A module path ending in an index: a repeated block (`model.layers.3`).
bool isBlock(StringRef name) {
  StringRef last = name.rsplit('.').second;
  if (last.empty())
    last = name;
  return !last.empty() &&
         llvm::all_of(last, [](char c) { return c >= '0' && c <= '9'; });
}

/// Whether `op` computes from constants and weights only (a constant the
/// importer placed at its first user, a transposed weight): a later block
/// may read it, it is no activation.
bool isFree(Operation *op, llvm::DenseMap<Operation *, bool> &memo) {
  if (!op)
    return false;
  if (auto it = memo.find(op); it != memo.end())
    return it->second;
  bool free = isa<ml_program::GlobalLoadOp>(op) ||
              op->getName().getStringRef() == "onnx.Constant";
  if (!free && op->getNumOperands() > 0 && op->getNumRegions() == 0)
    free = llvm::all_of(op->getOperands(), [&](Value v) {
      return isFree(v.getDefiningOp(), memo);
    });
  return memo[op] = free;
}

/// The op of the function's body that holds `op`.
Operation *topLevel(Operation *op) {
  while (op->getParentOp() && !isa<func::FuncOp>(op->getParentOp()))
    op = op->getParentOp();
  return op;
}

struct ZeroTruncateLayersPass
    : public ::zero::impl::ZeroTruncateLayersPassBase<ZeroTruncateLayersPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp func;
    for (auto f : module.getOps<func::FuncOp>())
      if (!f.isExternal()) {
        if (func) {
          module.emitError("zero-truncate-layers: expects one function (the "
                           "imported model)");
          return signalPassFailure();
        }
        func = f;
      }
    if (!func || keep < 1) {
      module.emitError(
          "zero-truncate-layers: needs the imported model and keep >= 1");
      return signalPassFailure();
    }
    zero::LayerStructure ls = zero::recoverLayers(func);
    SmallVector<int> blocks;
    for (auto [i, layer] : llvm::enumerate(ls.layers))
      if (!ls.segments && isBlock(layer.name))
        blocks.push_back(int(i));
    ::zero::attrs::kTruncatedFrom.set(
        module, IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                 int64_t(blocks.size())));
    if (int64_t(blocks.size()) <= keep)
      return;
    // The dropped region: the ops in program order from block keep's first
    // to the last block's last, glue between them included (an exporter may
    // leave a block's Split or mask outside its module path), but ops that
    // compute from constants and weights only (read by kept ops as well).
    Block &body = func.getBody().front();
    llvm::DenseMap<Operation *, int64_t> position;
    for (auto [i, op] : llvm::enumerate(body))
      position[&op] = int64_t(i);
    auto first = [&](const zero::Layer &l) {
      int64_t p = INT64_MAX;
      for (Operation *op : l.ops)
        p = std::min(p, position[op]);
      return p;
    };
    int64_t begin = first(ls.layers[blocks[keep]]), end = 0;
    for (Operation *op : ls.layers[blocks.back()].ops)
      end = std::max(end, position[op] + 1);
    const int64_t previous = first(ls.layers[blocks[keep - 1]]);
    llvm::DenseMap<Operation *, bool> memo;
    llvm::DenseSet<Operation *> dropped;
    for (Operation &op : body)
      if (position[&op] >= begin && position[&op] < end && !isFree(&op, memo) &&
          !op.hasTrait<OpTrait::IsTerminator>())
        dropped.insert(&op);
    // What leaves the region (the last block's activation) and what enters
    // it from block keep-1 (its activation; values from before that block,
    // masks and rotary tables, are the kept blocks' too).
    llvm::SetVector<Value> leaving, entering;
    for (Operation *op : dropped) {
      for (Value r : op->getResults())
        for (Operation *user : r.getUsers())
          if (!dropped.contains(topLevel(user)))
            leaving.insert(r);
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp();
            def && def->getBlock() == &body && !dropped.contains(def) &&
            !isFree(def, memo) && position[def] >= previous)
          entering.insert(v);
    }
    if (leaving.size() != 1 || entering.size() != 1 ||
        leaving[0].getType() != entering[0].getType()) {
      func.emitError()
          << "zero-truncate-layers: the blocks do not chain through one "
             "activation: "
          << entering.size() << " value(s) enter "
          << ls.layers[blocks[keep]].name << " from "
          << ls.layers[blocks[keep - 1]].name << ", " << leaving.size()
          << " leave " << ls.layers[blocks.back()].name;
      return signalPassFailure();
    }
    Value out = leaving[0];
    out.replaceUsesWithIf(entering[0], [&](OpOperand &use) {
      return !dropped.contains(topLevel(use.getOwner()));
    });
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (dropped.contains(&op)) {
        op.dropAllUses();
        op.erase();
      }
    // Then what only the region read (loads, constants), and the globals no
    // longer loaded.
    bool changed = true;
    while (changed) {
      changed = false;
      for (Operation &op :
           llvm::make_early_inc_range(llvm::reverse(func.getBody().front())))
        if (isOpTriviallyDead(&op)) {
          op.erase();
          changed = true;
        }
    }
    for (auto g :
         llvm::make_early_inc_range(module.getOps<ml_program::GlobalOp>()))
      if (SymbolTable::symbolKnownUseEmpty(g, module))
        g.erase();
  }
};

} // namespace
