//===- Bucket.cpp - Coalesce parameter gathers ----------------------------===//
//
// zero-bucket: zero.all_gather ops that already sit together (nothing between
// them but shard loads and the free unpad/reshape views of gathered
// parameters; same element type and world) are grouped while the group's
// gathered bytes stay within `bytes`; each group of two or more becomes one
// zero.bucket_all_gather at the first member's position. A bucket never moves
// a gather across compute: how early a gather runs is zero-prefetch's
// decision, made under its byte budget; this pass runs after it and only
// coalesces what prefetch (or the partitioner) put side by side. The
// runtime gathers a bucket into one buffer, each member into its part of it
// (its results are views: the bucket's bytes are held once), as DeepSpeed's
// coalesced all-gather does; the buffer lives until the last member dies, so
// with max-live-bytes (the prefetch budget) a bucket grows only while the
// block's peak with it stays within the bound.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/ZeroAttributes.h"
#include "zero/Transforms/Analysis/GatherPlan.h"

#include "zero/Transforms/Passes.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

namespace zero {
#define GEN_PASS_DEF_ZEROBUCKETPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
namespace attrs = ::zero::attrs;
using ::zero::dist::AllGatherOp;

namespace {

struct ZeroBucketPass : public ::zero::impl::ZeroBucketPassBase<ZeroBucketPass> {
  using Base::Base;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(runOnFunction(func)))
        return signalPassFailure();
  }

  LogicalResult runOnFunction(func::FuncOp func) {
    if (bytes < 0) {
      func.emitError() << "zero-bucket: bytes must be >= 0";
      return failure();
    }
    if (bytes == 0)
      return success();
    if (maxLiveBytes < 0) {
      func.emitError() << "zero-bucket: max-live-bytes must be >= 0";
      return failure();
    }
    ::zero::GatherLiveness liveness(func.getBody().front());
    SmallVector<SmallVector<AllGatherOp>> groups;
    int64_t groupBytes = 0;
    bool adjacent = false; // no compute since the current group's last member
    for (Operation &op : func.getBody().front()) {
      auto g = dyn_cast<AllGatherOp>(op);
      // A gather over a process group (a pipeline stage's replicas, hpZ's
      // in-group re-gathers) uses that group's communicator: it joins only
      // a bucket of the same group.
      if (g && !::zero::isGather(g))
        g = nullptr;
      if (!g) {
        adjacent &= isa<ml_program::GlobalLoadOp>(op) || ::zero::isParameterView(&op);
        continue;
      }
      int64_t n = ::zero::gatheredBytes(g);
      // The bucket's buffer holds all its members until the last of them
      // dies: with the bound, the block's peak with them as one bucket.
      bool withinLive = true;
      if (maxLiveBytes > 0 && !groups.empty() && !groups.back().empty()) {
        SmallVector<Operation *> members(groups.back().begin(), groups.back().end());
        members.push_back(g);
        withinLive = liveness.peakAsBucket(members) <= maxLiveBytes;
      }
      bool fits = adjacent && withinLive && !groups.empty() &&
                  groupBytes + n <= bytes &&
                  groups.back().front().getWorld() == g.getWorld() &&
                  groups.back().front().getGroupAttr() == g.getGroupAttr() &&
                  getElementTypeOrSelf(groups.back().front().getType()) ==
                      getElementTypeOrSelf(g.getType());
      if (!fits) {
        groups.push_back({});
        groupBytes = 0;
      }
      groups.back().push_back(g);
      groupBytes += n;
      adjacent = true;
    }
    OpBuilder b(func.getContext());
    for (auto &group : groups) {
      if (group.size() < 2)
        continue;
      AllGatherOp first = group.front();
      SmallVector<Value> shards;
      SmallVector<Type> types;
      for (AllGatherOp g : group) {
        if (Operation *def = g.getShard().getDefiningOp())
          if (first->isBeforeInBlock(def))
            def->moveBefore(first);
        shards.push_back(g.getShard());
        types.push_back(g.getType());
      }
      b.setInsertionPoint(first);
      auto bucket = ::zero::dist::BucketAllGatherOp::create(b, first.getLoc(), types,
                                                            shards, first.getWorld());
      if (first.getGroupAttr())
        bucket.setGroupAttr(first.getGroupAttr());
      if (Attribute step = first->getAttr(attrs::kPipelineStep))
        bucket->setAttr(attrs::kPipelineStep, step);
      for (auto [g, r] : llvm::zip(group, bucket.getResults())) {
        g.getResult().replaceAllUsesWith(r);
        g.erase();
      }
    }
    return success();
  }
};

} // namespace
