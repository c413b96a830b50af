//===- QuantizeReduce.cpp - qgZ: quantized gradient reduce-scatters -------===//
//
// zero-quantize-reduce (qgZ) turns gradient reduce-scatters into quantized
// all-to-alls, ZeRO++'s hierarchical form when given a group size. It only
// rewrites the IR: the quantization is visible to the lowering (kernels on the
// communication stream) and to zero-report (bytes on the wire).
//
//===----------------------------------------------------------------------===//

#include "Quantization.h"

#include "zero/Dialect/Zero/ZeroAttributes.h"

#include "zero/Transforms/Analysis/GatherPlan.h"
#include "zero/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace zero {
#define GEN_PASS_DEF_ZEROQUANTIZEREDUCEPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
using ::zero::dist::AllToAllOp;
using ::zero::dist::QuantizeOp;
using ::zero::dist::ReduceScatterOp;
using namespace ::zero::quantization;
namespace attrs = ::zero::attrs;

namespace {

struct ZeroQuantizeReducePass
    : public ::zero::impl::ZeroQuantizeReducePassBase<ZeroQuantizeReducePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkBitsBlock(module, "zero-quantize-reduce", bits, block)))
      return signalPassFailure();
    SmallVector<ReduceScatterOp> scatters;
    module.walk([&](ReduceScatterOp rs) {
      if (!rs.getGroupAttr())
        scatters.push_back(rs);
    });
    if (scatters.empty())
      return;
    const int64_t world = scatters.front().getWorld();
    if (group < 1 || world % group != 0) {
      module.emitError() << "zero-quantize-reduce: group " << int64_t(group)
                         << " must divide the world of " << world
                         << " ranks (1 or the world: one level)";
      return signalPassFailure();
    }
    const bool twoLevels = group > 1 && group < world;
    FlatSymbolRefAttr inside, across;
    if (twoLevels) {
      inside = processGroup(module, "qgz_inside", consecutive(world), group);
      across = processGroup(module, "qgz_across", strided(world, group), world / group);
    }
    for (ReduceScatterOp rs : scatters) {
      if (int64_t(rs.getWorld()) != world || !isF32(rs.getType())) {
        // Gradients are fp32 in this compiler; anything else keeps the plain
        // collective, marked for the report.
        attrs::kQgzFallback.set(rs, UnitAttr::get(rs.getContext()));
        continue;
      }
      ImplicitLocOpBuilder b(rs.getLoc(), rs);
      int64_t s = rs.getType().getNumElements();
      Value sum = twoLevels ? hierarchical(b, rs.getInput(), world, s, inside, across)
                            : oneLevel(b, rs.getInput(), world, s, world, nullptr);
      rs.getResult().replaceAllUsesWith(sum);
      rs.erase();
    }
  }

  /// `x` = [ranks x per] in destination order, quantized in `chunks` chunks,
  /// all-to-all over `g` (the world when null), dequantized and summed in
  /// source-rank order: group rank i gets the sum of everyone's block i, [per].
  Value oneLevel(ImplicitLocOpBuilder &b, Value x, int64_t ranks, int64_t per,
                 int64_t chunks, FlatSymbolRefAttr g) {
    int64_t n = cast<RankedTensorType>(x.getType()).getNumElements();
    QuantizeOp q = quantize(b, x, bits, block, chunks);
    auto toAll = [&](Value v) {
      auto a = AllToAllOp::create(b, v.getType(), v, ranks);
      if (g)
        a.setGroupAttr(g);
      return a.getResult();
    };
    Value data = toAll(q.getData()), scales = toAll(q.getScales());
    Value rows = dequantize(b, data, scales, n, bits, block, chunks);
    auto reshape = ::zero::onnx::ReshapeOp::create(b, rows, ArrayRef<int64_t>{ranks, per});
    auto sum = ::zero::onnx::ReduceSumOp::create(b, reshape, ArrayRef<int64_t>{0}, 0);
    onCommStream(sum);
    return sum;
  }

  /// ZeRO++'s hierarchical reduce-scatter over N = G x K ranks (G groups of
  /// K): x = [N x s] in destination order. Reordered to [K x G x s] (for
  /// position l inside the group: the slices of ranks n*K + l for every group
  /// n), one all-to-all inside the group leaves each rank the group's K
  /// contributions to its G destinations; their sum (re-quantized) goes
  /// across, where position l of group n receives every group's partial sum
  /// for rank n*K + l.
  Value hierarchical(ImplicitLocOpBuilder &b, Value x, int64_t world, int64_t s,
                     FlatSymbolRefAttr inside, FlatSymbolRefAttr across) {
    int64_t k = group, groups = world / group;
    Value grid = ::zero::onnx::ReshapeOp::create(b, x, ArrayRef<int64_t>{groups, k, s});
    auto reordered = ::zero::onnx::TransposeOp::create(b, grid, ArrayRef<int64_t>{1, 0, 2});
    onCommStream(reordered);
    Value flat = ::zero::onnx::ReshapeOp::create(b, reordered, ArrayRef<int64_t>{world * s});
    // Chunks of s: each destination's slice keeps its own blocks.
    Value partial = oneLevel(b, flat, k, groups * s, world, inside);
    return oneLevel(b, partial, groups, s, groups, across);
  }

  static SmallVector<int64_t> consecutive(int64_t world) {
    return llvm::to_vector(llvm::seq<int64_t>(0, world));
  }
  /// The ranks with the same position in their group of k, group by group.
  static SmallVector<int64_t> strided(int64_t world, int64_t k) {
    SmallVector<int64_t> ranks;
    for (int64_t l = 0; l < k; ++l)
      for (int64_t r = l; r < world; r += k)
        ranks.push_back(r);
    return ranks;
  }

  static FlatSymbolRefAttr processGroup(ModuleOp module, StringRef name,
                                        ArrayRef<int64_t> ranks, int64_t size) {
    if (!SymbolTable::lookupSymbolIn(module, name)) {
      OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
      ::zero::dist::ProcessGroupOp::create(b, module.getLoc(), name, ranks, size);
    }
    return FlatSymbolRefAttr::get(module.getContext(), name);
  }
};

} // namespace
