//===- QuantizeGather.cpp - qwZ: quantized parameter all-gathers ----------===//
//
// zero-quantize-gather (qwZ) puts zero.quantize / zero.dequantize around the
// world all-gathers of parameter shards. It only rewrites the IR: the
// quantization is visible to the lowering (kernels on the communication
// stream) and to zero-report (bytes on the wire).
//
//===----------------------------------------------------------------------===//

#include "Quantization.h"

#include "zero/Transforms/Analysis/GatherPlan.h"
#include "zero/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace zero {
#define GEN_PASS_DEF_ZEROQUANTIZEGATHERPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
using ::zero::dist::AllGatherOp;
using ::zero::dist::BucketAllGatherOp;
using ::zero::dist::DequantizeOp;
using ::zero::dist::QuantizeOp;
using namespace ::zero::quantization;

namespace {

struct ZeroQuantizeGatherPass
    : public ::zero::impl::ZeroQuantizeGatherPassBase<ZeroQuantizeGatherPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkBitsBlock(module, "zero-quantize-gather", bits, block)))
      return signalPassFailure();
    SmallVector<Operation *> gathers;
    module.walk([&](Operation *op) {
      // World gathers of fp32 parameter shards; hpZ's in-group re-gathers
      // stay exact (they are the cheap, intra-node ones).
      if (!::zero::isGather(op) || isa<DequantizeOp>(op))
        return;
      if (!::zero::overDataParallelWorld(op))
        return;
      if (llvm::all_of(op->getResultTypes(), isF32))
        gathers.push_back(op);
    });
    for (Operation *op : gathers) {
      ImplicitLocOpBuilder b(op->getLoc(), op);
      int64_t world = cast<IntegerAttr>(op->getAttr("world")).getInt();
      SmallVector<Value> data, scales;
      for (Value shard : op->getOperands()) {
        QuantizeOp q = quantize(b, shard, bits, block, 1);
        data.push_back(q.getData());
        scales.push_back(q.getScales());
      }
      auto gatheredType = [&](Value v) {
        auto t = cast<RankedTensorType>(v.getType());
        return RankedTensorType::get({world * t.getNumElements()}, t.getElementType());
      };
      // Over the gather's own group (a pipeline stage's replicas), if any.
      auto grouped = [&](Operation *g) {
        if (Attribute group = op->getAttr("group"))
          g->setAttr("group", group);
        return g;
      };
      SmallVector<Value> gotData, gotScales;
      if (isa<AllGatherOp>(op)) {
        gotData.push_back(grouped(AllGatherOp::create(b, gatheredType(data[0]), data[0], world))
                              ->getResult(0));
        gotScales.push_back(
            grouped(AllGatherOp::create(b, gatheredType(scales[0]), scales[0], world))
                ->getResult(0));
      } else {
        auto types = [&](ArrayRef<Value> vs) {
          return llvm::map_to_vector(vs, [&](Value v) -> Type { return gatheredType(v); });
        };
        gotData = grouped(BucketAllGatherOp::create(b, types(data), data, world))->getResults();
        gotScales =
            grouped(BucketAllGatherOp::create(b, types(scales), scales, world))->getResults();
      }
      for (auto [i, result] : llvm::enumerate(op->getResults())) {
        int64_t n = cast<RankedTensorType>(result.getType()).getNumElements();
        result.replaceAllUsesWith(
            dequantize(b, gotData[i], gotScales[i], n, bits, block, world));
      }
      op->erase();
    }
  }
};

} // namespace
