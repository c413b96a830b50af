//===- InlinePipelineStages.cpp - Stage bodies into their driver ----------===//
//
// zero-inline-pipeline-stages: the first step of zero-lower-to-runtime on a
// program cut into pipeline stages (zero-pipeline-split), whose driver calls
// one function per stage. The runtime runs one instruction stream in which
// every instruction names the ranks that run it, so each stage's body is
// cloned in place of its call, every op marked with the stage
// (zero.pipeline_stage: its ranks), one stage after the other: a rank runs
// its stage's ops in the stage function's order, and the memory plan lets
// blocks of different stages share bytes. A stage function no call is left
// to is erased.
//
// Calls of functions that are not stages are left alone (the lowering
// refuses them by name).
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/ZeroAttributes.h"
#include "zero/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "zero-inline-pipeline-stages"

namespace zero {
#define GEN_PASS_DEF_ZEROINLINEPIPELINESTAGESPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
using namespace zero;

namespace {

struct ZeroInlinePipelineStagesPass
    : public ::zero::impl::ZeroInlinePipelineStagesPassBase<
          ZeroInlinePipelineStagesPass> {
  using Base::Base;
  ZeroInlinePipelineStagesPass() = default;
  /// A clone counts on its own: statistics are not copied (and cannot be
  /// where LLVM tracks them).
  ZeroInlinePipelineStagesPass(const ZeroInlinePipelineStagesPass &other)
      : Base(other) {}

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> drivers;
    if (!function.empty()) {
      auto driver = module.lookupSymbol<func::FuncOp>(function);
      if (!driver) {
        module.emitError() << "zero-inline-pipeline-stages: no function @"
                           << function << " whose pipeline stages to inline";
        return signalPassFailure();
      }
      drivers.push_back(driver);
    } else {
      for (func::FuncOp f : module.getOps<func::FuncOp>())
        if (!attrs::kPipelineStage.isSetOn(f))
          drivers.push_back(f);
    }
    llvm::SetVector<func::FuncOp> inlined;
    for (func::FuncOp driver : drivers)
      if (failed(inlineStageCalls(module, driver, inlined)))
        return signalPassFailure();
    for (func::FuncOp f : inlined)
      if (SymbolTable::symbolKnownUseEmpty(f, module)) {
        f.erase();
        ++numFunctionsErased;
      }
  }

  /// Replaces each call in `driver` of a pipeline stage function by the
  /// stage's body, adding the callee to `inlined`.
  LogicalResult inlineStageCalls(ModuleOp module, func::FuncOp driver,
                                 llvm::SetVector<func::FuncOp> &inlined) {
    for (auto call :
         llvm::make_early_inc_range(driver.getOps<func::CallOp>())) {
      auto callee = module.lookupSymbol<func::FuncOp>(call.getCalleeAttr());
      if (!callee || !attrs::kPipelineStage.isSetOn(callee))
        continue;
      if (!callee.getBody().hasOneBlock())
        return callee.emitOpError("must have a single block to be lowered");
      inlineCall(call, callee);
      inlined.insert(callee);
    }
    return success();
  }

  /// Clones the stage's ops before `call`, each marked with the stage as the
  /// function carries it, and replaces the call's results with what the
  /// stage returns.
  void inlineCall(func::CallOp call, func::FuncOp callee) {
    Attribute stage = callee->getAttr(attrs::kPipelineStage);
    LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": inlining pipeline stage @"
                            << callee.getSymName() << " (" << stage << ")\n");
    OpBuilder b(call);
    IRMapping map;
    Block &body = callee.getBody().front();
    map.map(body.getArguments(), call.getOperands());
    for (Operation &op : body.without_terminator()) {
      Operation *copy = b.clone(op, map);
      copy->setAttr(attrs::kPipelineStage, stage);
      ++numOpsInlined;
    }
    for (auto [result, v] :
         llvm::zip(call.getResults(), body.getTerminator()->getOperands()))
      result.replaceAllUsesWith(map.lookupOrDefault(v));
    call.erase();
    ++numCallsInlined;
  }

  Statistic numCallsInlined{this, "calls",
                            "Calls of pipeline stage functions inlined"};
  Statistic numOpsInlined{this, "ops",
                          "Ops cloned from a stage into its caller"};
  Statistic numFunctionsErased{this, "erased-functions",
                               "Stage functions erased once no call is left"};
};

} // namespace
