//===- InOrderPlan.cpp - zero-plan-in-order
//---------------------------------===//
//
// The in-order plan: when the runtime's streams take turns (zero-run
// --overlap off, or auto with no core to spare), a communication step runs
// only while compute is idle at a wait for it or for a later step, or once
// compute has finished. A prefetched gather then runs where compute first
// needs it, as without prefetch; but the main plan keeps its bytes apart from
// everything in the layers it was moved across, so the gathered parameters
// spread over more distinct memory than they would in order (measured: 2-3%
// of a GPT-2-small ZeRO-3 forward at prefetch=2, bench/README.md). This plan
// places every activation block again over the interval it has in
// turn-taking order.
//
// Those intervals need no event beyond the program's own. Let start[h] be
// the first compute instruction that waits for communication step h or a
// later one (start never decreases along the steps). Step h cannot begin
// before compute is idle at start[h], and has finished once compute is past
// that wait (the wait is for a Record after it). So a block lives from its
// first write (start[h] when communication step h writes it first) to its
// last access, counting start[h] for each communication step h touching it.
// Two blocks with disjoint intervals A before B may share bytes:
//  - B first written by compute: every compute access of A came before, and
//    every communication step touching A finished before compute passed
//    start[h] <= A's end;
//  - B first written by step h: compute is idle at start[h] > A's end, so
//    A's compute accesses are done, and a step touching A has start <
//    start[h], so it precedes h on the communication stream.
// Programs whose compute stream receives (a pipeline stage: its wait frees
// every communication step) or that are cut into stages keep one plan.
//
//===----------------------------------------------------------------------===//

#include "MemoryPlan.h"

#include "zero/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "zero-plan-in-order"

namespace zero {
#define GEN_PASS_DEF_ZEROPLANINORDERPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;

namespace zero {
namespace lowering {

namespace {

/// start[h] for each communication step h (see the file comment); empty
/// when the program keeps one plan.
std::vector<int64_t> turnStarts(const ProgramModel &m,
                                std::vector<int64_t> &commSteps) {
  const int64_t n = int64_t(m.instrs.size());
  for (const ModelInstr &in : m.instrs)
    if (!in.ranks.empty() || (in.stream == kCompute && in.name == "Recv"))
      return {};
  for (int64_t i = 0; i < n; ++i)
    if (m.instrs[size_t(i)].stream == kComm)
      commSteps.push_back(i);
  if (commSteps.empty())
    return {};
  std::vector<int64_t> start(size_t(n), n);
  size_t next = 0;
  int64_t allowed = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (m.instrs[size_t(i)].stream != kCompute)
      continue;
    for (int64_t j : m.waits[size_t(i)])
      if (j >= 0 && m.instrs[size_t(j)].stream == kComm)
        allowed = std::max(allowed, j);
    for (; next < commSteps.size() && commSteps[next] <= allowed; ++next)
      start[size_t(commSteps[next])] = i;
  }
  return start;
}

} // namespace

/// Places the activation blocks in turn-taking order; their in-order offsets
/// and the arena's size there when that plan differs from the main one.
bool planInOrder(ProgramModel &m, int64_t &inOrderSize) {
  std::vector<int64_t> commSteps;
  std::vector<int64_t> start = turnStarts(m, commSteps);
  if (start.empty())
    return false;
  // Each block's interval in turn-taking order.
  std::vector<int64_t> def, last;
  for (const Storage &st : m.blocks) {
    def.push_back(st.def);
    last.push_back(st.lastUse);
  }
  std::vector<bool> commWritten(m.blocks.size(), false);
  for (int64_t h : commSteps) {
    const ModelInstr &in = m.instrs[size_t(h)];
    auto touch = [&](int s, bool write) {
      if (s < 0)
        return;
      last[s] = std::max(last[s], start[size_t(h)]);
      if (write && m.blocks[s].def == h)
        commWritten[s] = true;
    };
    for (int s : in.ins)
      touch(s, false);
    for (int s : in.outs)
      touch(s, true);
  }
  std::vector<int> order;
  for (auto [s, st] : llvm::enumerate(m.blocks)) {
    if (st.arena != ArenaKind::Activations)
      continue;
    if (commWritten[s])
      def[s] = start[size_t(st.def)];
    order.push_back(int(s));
  }
  llvm::stable_sort(order, [&](int a, int b) {
    return m.blocks[a].bytes > m.blocks[b].bytes;
  });
  int64_t size = 0;
  std::vector<int64_t> offsets = placeBlocks(m.blocks, order, def, last, &size);
  bool differs = false;
  for (int s : order)
    differs |= offsets[s] != m.blocks[s].offset;
  LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": in-order plan "
                          << (differs ? "differs" : "is the main plan") << ": "
                          << size << " activation bytes\n");
  if (!differs)
    return false;
  for (int s : order)
    m.blocks[s].inOrderOffset = offsets[s];
  inOrderSize = size;
  return true;
}

} // namespace lowering
} // namespace zero

namespace {

using namespace ::zero::lowering;

struct ZeroPlanInOrderPass
    : public ::zero::impl::ZeroPlanInOrderPassBase<ZeroPlanInOrderPass> {
  using Base::Base;

  void runOnOperation() override {
    FailureOr<ProgramModel> read =
        ProgramModel::read(getOperation(), "zero-plan-in-order");
    if (failed(read))
      return signalPassFailure();
    ProgramModel &m = *read;
    for (auto [s, block] : llvm::enumerate(m.blockOps))
      if (!block.getOffsetAttr() || !block.getDefAttr() ||
          !block.getLastUseAttr()) {
        block.emitOpError("zero-plan-in-order: a block without its plan (run "
                          "zero-plan-memory first)");
        return signalPassFailure();
      }
    int64_t size = 0;
    if (!planInOrder(m, size))
      return;
    Builder b(&getContext());
    for (auto [s, st] : llvm::enumerate(m.blocks))
      if (st.inOrderOffset >= 0)
        m.blockOps[s].setInOrderOffsetAttr(
            b.getI64IntegerAttr(st.inOrderOffset));
    m.arenas[int(ArenaKind::Activations)].setInOrderSizeAttr(
        b.getI64IntegerAttr(size));
  }
};

} // namespace
