//===- MemoryPlan.h - The memory plan's steps, shared ------------*- C++
//-*-===//
//
// zero-plan-memory's liveness and placement, which zero-plan-in-order reuses
// (placeBlocks). Internal to lib/Transforms/Lowering.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_LIB_TRANSFORMS_LOWERING_MEMORYPLAN_H
#define ZERO_LIB_TRANSFORMS_LOWERING_MEMORYPLAN_H

#include "ProgramModel.h"

namespace zero {
namespace lowering {

/// Each arena's planned size, no-reuse total and live-bytes lower bound.
struct ArenaPlan {
  int64_t size[kNumArenas] = {}, noReuse[kNumArenas] = {},
          lowerBound[kNumArenas] = {};
};

/// Live intervals (def, lastUse) and stages of every block; fails on a
/// release before a use.
LogicalResult computeLiveness(ProgramModel &m);

/// Offsets of every block; the arenas' figures.
ArenaPlan planMemory(ProgramModel &m);

/// Offsets for the blocks in `order` (the largest first), each at the lowest
/// offset free over its interval [def[s], last[s]] among the blocks placed
/// before it on a stage it shares; `size` grows to the end of the highest.
std::vector<int64_t> placeBlocks(const std::vector<Storage> &blocks,
                                 const std::vector<int> &order,
                                 const std::vector<int64_t> &def,
                                 const std::vector<int64_t> &last,
                                 int64_t *size);

} // namespace lowering
} // namespace zero

#endif // ZERO_LIB_TRANSFORMS_LOWERING_MEMORYPLAN_H
