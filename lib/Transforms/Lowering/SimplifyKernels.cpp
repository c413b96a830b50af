//===- SimplifyKernels.cpp - Cheaper equivalent kernels before lowering ---===//
//
// zero-simplify-kernels: the kernel-level rewrites zero-lower-to-runtime runs
// on the function it lowers, after zero-inline-pipeline-stages (a MatMul of
// a transposed weight becomes a Gemm that reads the weight as stored: the
// tied LM head, PyTorch Linear layers). Program order is the schedule: the
// rewrite is applied greedily with folding, constant CSE (which hoists
// constants) and region simplification off, so every op it does not rewrite
// stays where it is.
//
// A rewrite can make an op read a gathered parameter where only its
// transpose was read before: the tied LM head's Gemm reads the embedding
// itself, after the zero.release zero-release put after the transpose. Each
// such release moves after the last op the rewrite created that reads it, so
// the pass's output never reads a released parameter (zero-release itself
// leaves a value that is already released alone).
//
//===----------------------------------------------------------------------===//

#include "zero/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "zero-simplify-kernels"

namespace zero {
#define GEN_PASS_DEF_ZEROSIMPLIFYKERNELSPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;

namespace {

/// The rewrites of the pass: the canonicalization patterns of the onnx ops
/// they rewrite (ONNXOps.cpp). Only these: the op-agnostic canonicalizer
/// would also fold, hoist and merge constants, which the schedule forbids.
void populateSimplifyKernelsPatterns(RewritePatternSet &patterns) {
  ::zero::onnx::MatMulOp::getCanonicalizationPatterns(patterns,
                                                      patterns.getContext());
}

/// Records what the rewrites do: the ops they create (whose reads a release
/// must follow) and the ops they replace.
struct RewriteRecord : public RewriterBase::Listener {
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    created.insert(op);
  }
  void notifyOperationReplaced(Operation *, ValueRange) override { ++replaced; }

  llvm::SmallPtrSet<Operation *, 8> created;
  int64_t replaced = 0;
};

struct ZeroSimplifyKernelsPass
    : public ::zero::impl::ZeroSimplifyKernelsPassBase<
          ZeroSimplifyKernelsPass> {
  using Base::Base;
  ZeroSimplifyKernelsPass() = default;
  /// A clone counts on its own: statistics are not copied (and cannot be
  /// where LLVM tracks them).
  ZeroSimplifyKernelsPass(const ZeroSimplifyKernelsPass &other) : Base(other) {}

  void runOnOperation() override {
    Operation *root = getOperation();
    RewritePatternSet patterns(&getContext());
    populateSimplifyKernelsPatterns(patterns);
    RewriteRecord record;
    GreedyRewriteConfig config;
    config.enableFolding(false)
        .enableConstantCSE(false)
        .setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled)
        .setListener(&record);
    if (failed(applyPatternsGreedily(root, std::move(patterns), config))) {
      root->emitError("zero-simplify-kernels: the rewrites did not converge");
      return signalPassFailure();
    }
    numRewritten += record.replaced;
    if (!record.created.empty())
      moveReleasesAfterCreatedReaders(root, record.created);
  }

  /// Moves each zero.release after the last op of its block that the
  /// rewrites created and that reads the released value.
  void moveReleasesAfterCreatedReaders(
      Operation *root, const llvm::SmallPtrSetImpl<Operation *> &created) {
    root->walk([&](::zero::dist::ReleaseOp release) {
      Operation *last = release;
      for (Operation *user : release.getValue().getUsers())
        if (created.contains(user) && user->getBlock() == release->getBlock() &&
            last->isBeforeInBlock(user))
          last = user;
      if (last == release.getOperation())
        return;
      LLVM_DEBUG(llvm::dbgs()
                 << DEBUG_TYPE ": release at " << release.getLoc()
                 << " moves after the rewritten " << last->getName() << "\n");
      release->moveAfter(last);
      ++numReleasesMoved;
    });
  }

  Statistic numRewritten{this, "rewritten",
                         "Ops replaced by cheaper equivalents"};
  Statistic numReleasesMoved{
      this, "moved-releases",
      "zero.release ops moved after a rewrite's new reader"};
};

} // namespace
