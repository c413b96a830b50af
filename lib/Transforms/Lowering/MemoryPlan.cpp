//===- MemoryPlan.cpp - zero-plan-memory
//------------------------------------===//
//
// Live intervals of every block of a zrt.program (a gathered parameter dies
// at its last zrt.release) and arena offsets: params and constants packed
// once, activations greedily by size over their live intervals, so dead
// blocks' space is reused. Also the no-reuse total and the live-bytes lower
// bound of each arena. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "MemoryPlan.h"

#include "zero/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Debug.h"

#include <map>

#define DEBUG_TYPE "zero-plan-memory"

namespace zero {
#define GEN_PASS_DEF_ZEROPLANMEMORYPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;

namespace zero {
namespace lowering {

namespace {

constexpr uint64_t kAllStages = ~uint64_t(0);

uint64_t stagesOf(const ModelInstr &in) {
  uint64_t mask = 0;
  for (int64_t r : in.ranks)
    mask |= r >= 0 && r < 64 ? uint64_t(1) << r : kAllStages;
  return in.ranks.empty() ? kAllStages : mask;
}

/// Intervals from the instructions' reads and writes: a view shares its
/// block, so any instruction reading a view reads the block.
void readsAndWrites(ProgramModel &m) {
  for (auto [i, in] : llvm::enumerate(m.instrs)) {
    const uint64_t stages = stagesOf(in);
    for (int s : in.ins) {
      if (s < 0)
        continue;
      m.blocks[s].lastUse = std::max<int64_t>(m.blocks[s].lastUse, i);
      m.blocks[s].stages |= stages;
    }
    for (int s : in.outs) {
      if (s < 0)
        continue;
      m.blocks[s].def = std::min<int64_t>(m.blocks[s].def, i);
      m.blocks[s].lastUse = std::max<int64_t>(m.blocks[s].lastUse, i);
      m.blocks[s].stages |= stages;
    }
  }
  // Inputs are bound and outputs read on every rank that has them: kept
  // apart from every stage's blocks.
  for (int s : m.outputs)
    m.blocks[s].stages = kAllStages;
  for (int s : m.inputs)
    m.blocks[s].stages = kAllStages;
  for (Storage &st : m.blocks)
    if (!st.stages)
      st.stages = kAllStages;
}

/// A collective reads its input on the communication stream while the
/// compute stream goes on: were its memory reused at once, the next compute
/// kernel writing there would have to wait for the collective (a
/// write-after-read hazard), and backward would stop at every gradient's
/// reduce-scatter. Its input stays allocated until the next collective of
/// its stream is issued (by then it has most likely finished), so at most
/// one more collective's input is held.
void holdCollectiveInputs(ProgramModel &m) {
  const int64_t end = int64_t(m.instrs.size());
  std::vector<int64_t> next(m.instrs.size(), end);
  llvm::DenseMap<int, int64_t> seen;
  for (int64_t i = end - 1; i >= 0; --i) {
    const ModelInstr &in = m.instrs[size_t(i)];
    if (!in.isCollective)
      continue;
    auto it = seen.find(in.stream);
    next[size_t(i)] = it == seen.end() ? end : it->second;
    seen[in.stream] = i;
  }
  for (auto [i, in] : llvm::enumerate(m.instrs)) {
    if (!in.isCollective)
      continue;
    for (int s : in.ins)
      if (s >= 0 && m.blocks[s].lastUse == int64_t(i))
        m.blocks[s].lastUse = next[i];
  }
}

} // namespace

LogicalResult computeLiveness(ProgramModel &m) {
  const int64_t end = int64_t(m.instrs.size());
  readsAndWrites(m);
  holdCollectiveInputs(m);
  for (int s : m.outputs)
    m.blocks[s].lastUse = end;
  for (int s : m.inputs)
    m.blocks[s].def = -1;
  // A gathered parameter lives until its zero.release, the single source of
  // truth; one never released is kept to the end of the program.
  for (Storage &st : m.blocks) {
    if (!st.gathered)
      continue;
    if (!st.release) {
      st.lastUse = end;
      continue;
    }
    if (st.lastUse > st.released) {
      // The mark stands for the zero.release the lowering met there.
      InFlightDiagnostic diag = emitError(st.release->getLoc())
                                << "'zero.release' op releases a gathered "
                                   "parameter that is still used after it; "
                                   "move the release after its last use";
      if (st.lastUse < end)
        diag.attachNote(m.instrs[size_t(st.lastUse)].op->getLoc())
            << "used here";
      return diag;
    }
    st.lastUse = std::max(st.lastUse, st.released);
  }
  return success();
}

std::vector<int64_t> placeBlocks(const std::vector<Storage> &blocks,
                                 const std::vector<int> &order,
                                 const std::vector<int64_t> &def,
                                 const std::vector<int64_t> &last,
                                 int64_t *size) {
  std::vector<int64_t> offset(blocks.size(), -1);
  std::vector<int> placed;
  for (int s : order) {
    const Storage &st = blocks[s];
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (int p : placed)
      if (def[p] <= last[s] && def[s] <= last[p] &&
          (blocks[p].stages & st.stages))
        busy.push_back({offset[p], offset[p] + alignUp(blocks[p].bytes)});
    llvm::sort(busy);
    int64_t candidate = 0;
    for (auto [lo, hi] : busy) {
      if (candidate + alignUp(st.bytes) <= lo)
        break;
      candidate = std::max(candidate, hi);
    }
    offset[s] = candidate;
    *size = std::max(*size, candidate + alignUp(st.bytes));
    placed.push_back(s);
  }
  return offset;
}

namespace {

/// Params: whole tensors and shards, in the order of their globals. The
/// offloaded ones the same way, in the offload arena (the swap file),
/// page-aligned so that swapping one never touches another's pages; the host
/// arena's (offload device cpu) as the params arena's. Constants: never
/// freed.
void packGlobalsAndConstants(ProgramModel &m, ArenaPlan &plan) {
  int64_t offset = 0, offloaded = 0, host = 0;
  for (int s : m.globals) {
    Storage &st = m.blocks[s];
    if (st.arena == ArenaKind::Offload) {
      st.offset = offloaded;
      offloaded += (st.bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
      continue;
    }
    if (st.arena == ArenaKind::Host) {
      st.offset = host;
      host += alignUp(st.bytes);
      continue;
    }
    st.offset = offset;
    offset += alignUp(st.bytes);
  }
  const int params = int(ArenaKind::Params), hostArena = int(ArenaKind::Host);
  plan.size[params] = plan.noReuse[params] = plan.lowerBound[params] = offset;
  plan.size[hostArena] = plan.noReuse[hostArena] = plan.lowerBound[hostArena] =
      host;
  // The offload arena's lower bound: the most of it the swaps keep resident
  // at once (the lowering's bound on the resident bytes, its lower_bound;
  // the rest stays in the swap file).
  const int off = int(ArenaKind::Offload);
  int64_t resident = m.arenas[off] ? int64_t(m.arenas[off].getLowerBound()) : 0;
  plan.size[off] = plan.noReuse[off] = offloaded;
  plan.lowerBound[off] = std::min(offloaded, resident);
  offset = 0;
  for (int s : m.constants) {
    m.blocks[s].offset = offset;
    offset += alignUp(m.blocks[s].bytes);
  }
  const int constants = int(ArenaKind::Constants);
  plan.size[constants] = plan.noReuse[constants] = plan.lowerBound[constants] =
      offset;
}

/// The most bytes simultaneously live at any instruction, on any one stage
/// (a program without stages has one: every bit set). A sweep over the
/// blocks' starts and ends, per stage.
int64_t liveBytesBound(const ProgramModel &m, const std::vector<int> &order) {
  int64_t bound = 0;
  uint64_t stageBits = 0;
  for (int s : order)
    if (m.blocks[s].stages != kAllStages)
      stageBits |= m.blocks[s].stages;
  for (int stage = -1; stage < 64; ++stage) {
    const uint64_t bit = stage < 0 ? kAllStages : uint64_t(1) << stage;
    if (stage < 0 ? stageBits != 0 : !(stageBits & bit))
      continue; // staged: each stage on its own; else one pass
    std::map<int64_t, int64_t> delta;
    for (int s : order)
      if (m.blocks[s].stages & bit) {
        delta[m.blocks[s].def] += alignUp(m.blocks[s].bytes);
        delta[m.blocks[s].lastUse + 1] -= alignUp(m.blocks[s].bytes);
      }
    int64_t live = 0;
    for (auto [at, d] : delta) {
      live += d;
      bound = std::max(bound, live);
    }
  }
  return bound;
}

} // namespace

ArenaPlan planMemory(ProgramModel &m) {
  ArenaPlan plan;
  packGlobalsAndConstants(m, plan);
  // Activations: greedy by size over live intervals.
  const int act = int(ArenaKind::Activations);
  std::vector<int> order;
  for (size_t s = 0; s < m.blocks.size(); ++s)
    if (m.blocks[s].arena == ArenaKind::Activations) {
      if (m.blocks[s].def == INT64_MAX)
        m.blocks[s].def = m.blocks[s].lastUse; // written by nobody
      order.push_back(int(s));
      plan.noReuse[act] += alignUp(m.blocks[s].bytes);
    }
  llvm::stable_sort(order, [&](int a, int b) {
    return m.blocks[a].bytes > m.blocks[b].bytes;
  });
  std::vector<int64_t> def, last;
  for (const Storage &st : m.blocks) {
    def.push_back(st.def);
    last.push_back(st.lastUse);
  }
  std::vector<int64_t> offsets =
      placeBlocks(m.blocks, order, def, last, &plan.size[act]);
  for (int s : order)
    m.blocks[s].offset = offsets[s];
  plan.lowerBound[act] = liveBytesBound(m, order);
  return plan;
}

} // namespace lowering
} // namespace zero

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {

using namespace ::zero::lowering;

struct ZeroPlanMemoryPass
    : public ::zero::impl::ZeroPlanMemoryPassBase<ZeroPlanMemoryPass> {
  using Base::Base;
  ZeroPlanMemoryPass() = default;
  /// A clone counts on its own: statistics are not copied.
  ZeroPlanMemoryPass(const ZeroPlanMemoryPass &other) : Base(other) {}

  void runOnOperation() override {
    FailureOr<ProgramModel> read =
        ProgramModel::read(getOperation(), "zero-plan-memory");
    if (failed(read))
      return signalPassFailure();
    ProgramModel &m = *read;
    for (auto [a, arena] : llvm::enumerate(m.arenas))
      if (!arena && a <= size_t(ArenaKind::Activations)) {
        getOperation().emitOpError()
            << "zero-plan-memory: no arena @" << kArenaNames[a];
        return signalPassFailure();
      }
    if (failed(computeLiveness(m)))
      return signalPassFailure();
    ArenaPlan plan = planMemory(m);
    Builder b(&getContext());
    for (auto [s, st] : llvm::enumerate(m.blocks)) {
      ::zero::zrt::BlockOp block = m.blockOps[s];
      block.setDefAttr(b.getI64IntegerAttr(st.def));
      block.setLastUseAttr(b.getI64IntegerAttr(st.lastUse));
      block.setStagesAttr(b.getI64IntegerAttr(int64_t(st.stages)));
      block.setOffsetAttr(b.getI64IntegerAttr(st.offset));
    }
    for (auto [a, arena] : llvm::enumerate(m.arenas)) {
      if (!arena)
        continue;
      arena.setSize(plan.size[a]);
      arena.setNoReuseSize(plan.noReuse[a]);
      arena.setLowerBound(plan.lowerBound[a]);
    }
    for (Operation *release : m.releases)
      release->erase();
    LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": arenas params=" << plan.size[0]
                            << " constants=" << plan.size[1] << " activations="
                            << plan.size[2] << " (no reuse " << plan.noReuse[2]
                            << ", live bound " << plan.lowerBound[2] << ")\n");
    paramsArenaBytes += plan.size[int(ArenaKind::Params)];
    constantsArenaBytes += plan.size[int(ArenaKind::Constants)];
    activationsArenaBytes += plan.size[int(ArenaKind::Activations)];
  }

  Statistic paramsArenaBytes{
      this, "params-arena-bytes",
      "Bytes of the params arena (parameters, shards, optimizer state)"};
  Statistic constantsArenaBytes{this, "constants-arena-bytes",
                                "Bytes of the constants arena"};
  Statistic activationsArenaBytes{
      this, "activations-arena-bytes",
      "Bytes of the activations arena after memory reuse"};
};

} // namespace
