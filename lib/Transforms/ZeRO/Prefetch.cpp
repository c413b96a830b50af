//===- Prefetch.cpp - Issue parameter gathers ahead of their use ----------===//
//
// zero-prefetch: with gathers ordered by where their parameters are first
// used, gather j moves to just before the first use of gather j-depth (the
// first `depth` gathers move to the start of the function). On the runtime's
// communication stream it then overlaps the compute in between. A gather
// moves less far when the gathered bytes live at its new position would
// exceed `bytes` anywhere in the range it crosses (DeepSpeed's
// stage3_max_live_parameters /
// stage3_prefetch_bucket_size, decided here once for the whole program rather
// than from a recorded trace).
//
//===----------------------------------------------------------------------===//

#include "zero/Transforms/Analysis/GatherPlan.h"

#include "zero/Transforms/Passes.h"

#include <optional>
#include <vector>

namespace zero {
#define GEN_PASS_DEF_ZEROPREFETCHPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;

namespace {

struct ZeroPrefetchPass : public ::zero::impl::ZeroPrefetchPassBase<ZeroPrefetchPass> {
  using Base::Base;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(runOnFunction(func)))
        return signalPassFailure();
  }

  LogicalResult runOnFunction(func::FuncOp func) {
    if (depth < 0 || bytes < 0) {
      func.emitError() << "zero-prefetch: depth and bytes must be >= 0";
      return failure();
    }
    if (depth == 0)
      return success();
    Block &block = func.getBody().front();
    struct Entry {
      Operation *gather;
      Operation *first;
      int64_t bytes;
    };
    SmallVector<Entry> entries;
    for (Operation &op : block)
      if (::zero::isGather(&op))
        if (Operation *first = ::zero::firstUse(&op))
          entries.push_back({&op, first, ::zero::gatheredBytes(&op)});
    llvm::stable_sort(entries, [](const Entry &a, const Entry &b) {
      return a.first->isBeforeInBlock(b.first);
    });

    // Gathers hoisted to the function start keep their use order there.
    Operation *lastAtStart = nullptr;
    std::vector<int64_t> rangeMax;
    for (size_t j = 0; j < entries.size(); ++j) {
      Entry &e = entries[j];
      std::optional<::zero::GatherLiveness> liveness;
      if (bytes > 0) {
        // Moving e to an op adds e's bytes to every point from there to where
        // e is now, so the whole range must fit: the most bytes live (from
        // every other gather) over [op, e), for each op before e.
        liveness.emplace(block);
        const int64_t here = liveness->position(e.gather);
        rangeMax.assign(size_t(here) + 1, 0);
        for (int64_t p = here - 1; p >= 0; --p)
          rangeMax[size_t(p)] =
              std::max(liveness->liveBytesAt(p, e.gather), rangeMax[size_t(p + 1)]);
      }
      for (int64_t d = std::min<int64_t>(depth, j + 1); d >= 1; --d) {
        bool atStart = int64_t(j) - d < 0;
        Operation *target = atStart ? (lastAtStart ? lastAtStart->getNextNode()
                                                   : &block.front())
                                    : entries[j - d].first;
        if (target == e.gather || !target->isBeforeInBlock(e.gather))
          continue; // already at or before that point
        if (bytes > 0 && rangeMax[size_t(liveness->position(target))] + e.bytes > bytes)
          continue;
        e.gather->moveBefore(target);
        // Shard loads have no operands: they follow their gather up.
        for (Value operand : e.gather->getOperands())
          if (Operation *def = operand.getDefiningOp())
            if (def->getBlock() == &block && e.gather->isBeforeInBlock(def))
              def->moveBefore(e.gather);
        if (atStart)
          lastAtStart = e.gather;
        break;
      }
    }
    return success();
  }
};

} // namespace
