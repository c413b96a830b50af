//===- Hierarchical.cpp - hpZ: re-gathers inside a group of ranks ----------===//
//
// zero-hierarchical: ZeRO++'s hierarchical partitioning (hpZ). The first
// gather of a parameter is a world all-gather; from its result each rank
// keeps a secondary shard over its group of K consecutive ranks, and every
// later gather of the parameter gathers that secondary shard within the group.
// Runs after zero-prefetch (the re-gathers stay where prefetch put them) and
// before zero-bucket and zero-release, which treat the in-group gathers as
// parameter gathers of their own (never bucketed with world gathers).
//
//===----------------------------------------------------------------------===//

#include "zero/Transforms/Analysis/GatherPlan.h"

#include "zero/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace zero {
#define GEN_PASS_DEF_ZEROHIERARCHICALPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
using ::zero::dist::AllGatherOp;

namespace {

struct ZeroHierarchicalPass
    : public ::zero::impl::ZeroHierarchicalPassBase<ZeroHierarchicalPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (group < 1) {
      module.emitError() << "zero-hierarchical: group must be >= 1, got " << int64_t(group);
      return signalPassFailure();
    }
    if (group == 1)
      return;
    SmallVector<AllGatherOp> gathers;
    module.walk([&](AllGatherOp g) {
      if (::zero::isGather(g) && ::zero::overDataParallelWorld(g))
        gathers.push_back(g);
    });
    if (gathers.empty())
      return;
    const int64_t world = gathers.front().getWorld();
    if (world % group != 0) {
      module.emitError() << "zero-hierarchical: a group of " << int64_t(group)
                         << " ranks does not divide the data-parallel world of "
                         << world << " (zero_hpz_partition_size must divide it)";
      return signalPassFailure();
    }
    if (group == world)
      return; // the secondary partition would be the primary one
    MLIRContext *ctx = module.getContext();
    auto hpz = FlatSymbolRefAttr::get(ctx, "hpz");
    if (!SymbolTable::lookupSymbolIn(module, "hpz")) {
      // Consecutive groups over every rank: in a program cut into pipeline
      // stages (@dp: each stage's `world` consecutive replicas) a group
      // never straddles two stages, since it divides `world`.
      int64_t ranks = world;
      if (auto replicas = SymbolTable::lookupSymbolIn(module, ::zero::kStageReplicasGroup))
        if (auto pg = dyn_cast<::zero::dist::ProcessGroupOp>(replicas))
          ranks = int64_t(pg.getRanks().size());
      OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
      ::zero::dist::ProcessGroupOp::create(
          b, module.getLoc(), "hpz", llvm::to_vector(llvm::seq<int64_t>(0, ranks)),
          group);
    }

    // Per function and global, in program order: the first gather keeps
    // the world collective; the secondary shard is taken from it.
    llvm::DenseMap<std::pair<Operation *, Attribute>, Value> secondary;
    llvm::DenseMap<std::pair<Operation *, Attribute>, AllGatherOp> first;
    OpBuilder b(ctx);
    for (AllGatherOp g : gathers) {
      auto load = g.getShard().getDefiningOp<ml_program::GlobalLoadOp>();
      auto key = std::make_pair(g->getParentOp(), Attribute(load.getGlobalAttr()));
      if (int64_t(g.getWorld()) != world)
        continue;
      auto it = first.find(key);
      if (it == first.end()) {
        first[key] = g;
        continue;
      }
      Value &sec = secondary[key];
      if (!sec) {
        // Before the parameter's first use (so bucketed world gathers stay
        // together), or before this re-gather when prefetch hoisted it there.
        AllGatherOp primary = it->second;
        Operation *at = ::zero::firstUse(primary);
        if (!at || g->isBeforeInBlock(at))
          at = g;
        b.setInsertionPoint(at);
        auto full = primary.getType();
        sec = ::zero::dist::LocalShardOp::create(
            b, primary.getLoc(),
            RankedTensorType::get({full.getNumElements() / group}, full.getElementType()),
            primary.getResult(), group, hpz);
      }
      b.setInsertionPoint(g);
      auto regather = AllGatherOp::create(b, g.getLoc(), g.getType(), sec, group);
      regather.setGroupAttr(hpz);
      g.getResult().replaceAllUsesWith(regather.getResult());
      g.erase();
      if (load->use_empty())
        load.erase();
    }
  }
};

} // namespace
