//===- Verify.cpp - zero-verify: the invariants at the end of a phase ------===//
//
// zero-opt's pipeline has three phases: the import, the ZeRO passes and the
// lowering. Each later pass assumes what the earlier phase promised; this
// pass checks those promises where the phase ends, so a broken one is
// reported by its maker (with the op's location), as IREE's verify passes do
// between its phases. It changes nothing.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/ZRT/ZRTDialect.h"
#include "zero/Dialect/Zero/ZeroAttributes.h"
#include "zero/Transforms/Analysis/ShardLayout.h"
#include "zero/Transforms/Passes.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "zero-verify"

namespace zero {
#define GEN_PASS_DEF_ZEROVERIFYPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
namespace attrs = ::zero::attrs;

namespace {

/// The importer's promise: onnx, func and ml_program ops only, and every
/// global names its initializer.
LogicalResult verifyImported(ModuleOp module) {
  WalkResult result = module.walk([&](Operation *op) {
    if (op == module.getOperation())
      return WalkResult::advance();
    StringRef dialect = op->getDialect() ? op->getDialect()->getNamespace() : "";
    if (dialect != "onnx" && dialect != "func" && dialect != "ml_program") {
      op->emitOpError() << "is not an onnx, func or ml_program op; the import "
                           "produces no other (zero-verify phase=imported)";
      return WalkResult::interrupt();
    }
    if (auto global = dyn_cast<ml_program::GlobalOp>(op);
        global && !attrs::kTensor.get(global)) {
      op->emitOpError() << "does not name its ONNX initializer (" << attrs::kTensor.name
                        << "); the importer sets it on every global "
                           "(zero-verify phase=imported)";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

/// One sharded global against DeepSpeed's flatten-pad-split rule: a flat
/// shard of padded / world elements, padded = numel rounded up to the world.
LogicalResult verifyShard(ml_program::GlobalOp global,
                          ::zero::dist::ShardAttr shard) {
  // The attribute's own verifier holds world >= 1 and DeepSpeed's padding;
  // here the global's types must agree with it.
  const int64_t world = shard.getWorld(), numel = shard.getNumel(),
                padded = shard.getPaddedNumel();
  auto fail = [&](const Twine &what) {
    return global.emitOpError() << "is sharded (" << attrs::kShard.name << ") but " << what
                                << " (zero-verify phase=sharded)";
  };
  if (auto full = attrs::kFullType.get(global)) {
    auto fullType = dyn_cast<ShapedType>(full.getValue());
    if (!fullType || !fullType.hasStaticShape() ||
        fullType.getNumElements() != numel)
      return fail("its " + attrs::kFullType.name + " does not hold numel " +
                  Twine(numel) + " elements");
  }
  auto type = dyn_cast<RankedTensorType>(global.getType());
  if (!type || type.getRank() != 1 || type.getDimSize(0) != padded / world)
    return fail("its type is not a flat shard of " + Twine(padded / world) +
                " elements");
  return success();
}

/// The ZeRO passes' promise: every sharded global is a well-formed shard.
LogicalResult verifySharded(ModuleOp module) {
  for (auto global : module.getOps<ml_program::GlobalOp>())
    if (auto shard = attrs::kShard.get(global))
      if (failed(verifyShard(global, shard)))
        return failure();
  return success();
}

/// The lowering's promise: a zrt.program holds zrt ops only, every buffer
/// placed in its arena (no zrt.block or zrt.release left).
LogicalResult verifyLowered(ModuleOp module) {
  WalkResult result = module.walk([&](::zero::zrt::ProgramOp program) {
    WalkResult inner = program.walk([&](Operation *op) {
      if (isa<::zero::zrt::BlockOp, ::zero::zrt::ReleaseOp>(op)) {
        op->emitOpError()
            << "is left in a zrt.program; the lowering places every buffer in "
               "its arena (zero-finalize-program; zero-verify phase=lowered)";
        return WalkResult::interrupt();
      }
      if (isa<::zero::zrt::ZRTDialect>(op->getDialect()))
        return WalkResult::advance();
      op->emitOpError() << "is left inside a zrt.program; the lowering leaves zrt "
                           "ops only (zero-verify phase=lowered)";
      return WalkResult::interrupt();
    });
    return inner.wasInterrupted() ? WalkResult::interrupt() : WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

struct ZeroVerifyPass : public ::zero::impl::ZeroVerifyPassBase<ZeroVerifyPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    LLVM_DEBUG(llvm::dbgs() << "zero-verify: phase " << int(phase.getValue()) << "\n");
    LogicalResult verified = success();
    switch (phase) {
    case ::zero::VerifyPhase::Imported:
      verified = verifyImported(module);
      break;
    case ::zero::VerifyPhase::Sharded:
      verified = verifySharded(module);
      break;
    case ::zero::VerifyPhase::Lowered:
      verified = verifyLowered(module);
      break;
    }
    if (failed(verified))
      return signalPassFailure();
    markAllAnalysesPreserved();
  }
};

} // namespace
