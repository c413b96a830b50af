//===- Release.cpp - Free gathered parameters after their last use --------===//
//
// zero-release: after the last op that uses a gathered parameter (through
// its unpad/reshape views), insert zero.release of the parameter. The memory
// planner in zero-lower-to-runtime then reuses that space; persistent
// (unsharded) parameters are never gathered and never released.
//
//===----------------------------------------------------------------------===//

#include "zero/Transforms/Analysis/GatherPlan.h"

#include "zero/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace zero {
#define GEN_PASS_DEF_ZERORELEASEPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;

namespace {

struct ZeroReleasePass : public ::zero::impl::ZeroReleasePassBase<ZeroReleasePass> {
  using Base::Base;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(runOnFunction(func)))
        return signalPassFailure();
  }

  LogicalResult runOnFunction(func::FuncOp func) {
    SmallVector<Operation *> gathers;
    func.walk([&](Operation *op) {
      if (::zero::isGather(op))
        gathers.push_back(op);
    });
    OpBuilder b(func.getContext());
    for (Operation *gather : gathers) {
      for (Value result : gather->getResults()) {
        SmallVector<Value> views = ::zero::parameterViews(result);
        bool released = llvm::any_of(views, [](Value v) {
          return llvm::any_of(v.getUsers(),
                              [](Operation *u) { return isa<::zero::dist::ReleaseOp>(u); });
        });
        if (released)
          continue;
        // The last op in the block touching any view; release the final view
        // (the parameter as compute sees it) right after it.
        Operation *last = nullptr;
        for (Value v : views) {
          if (Operation *def = v.getDefiningOp(); def && (!last || last->isBeforeInBlock(def)))
            last = def;
          for (Operation *u : v.getUsers()) {
            while (u->getBlock() != gather->getBlock())
              u = u->getParentOp();
            if (!last || last->isBeforeInBlock(u))
              last = u;
          }
        }
        if (last->hasTrait<OpTrait::IsTerminator>()) {
          // Returned to the caller: it must stay alive.
          continue;
        }
        b.setInsertionPointAfter(last);
        ::zero::dist::ReleaseOp::create(b, gather->getLoc(), views.back());
      }
    }
    return success();
  }
};

} // namespace
