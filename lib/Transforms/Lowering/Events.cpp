//===- Events.cpp - zero-insert-events ------------------------------------===//
//
// For each instruction, the earlier instructions on the other stream it must
// follow: read-after-write on its inputs, write-after-read and write-after-
// write on memory its outputs reuse, and the program-order fence that keeps a
// gather where the pass pipeline put it. One event per producing instruction;
// a stream waits only for the latest event it has not yet waited for. See
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "ProgramModel.h"

#include "zero/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

#include <array>
#include <map>
#include <set>

#define DEBUG_TYPE "zero-insert-events"

namespace zero {
#define GEN_PASS_DEF_ZEROINSERTEVENTSPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;

namespace zero {
namespace lowering {

namespace {

/// The stage an instruction runs on (-1: every rank). Pipeline stages run on
/// their own ranks: an instruction follows only instructions that run
/// wherever it runs (every rank, or its stage), and its wait and the event it
/// waits for run on its ranks only, so no rank ever waits for a point of
/// another stage's schedule.
int64_t stageOf(const ModelInstr &in) {
  return in.ranks.empty() ? -1 : in.ranks.front();
}

/// One stage's schedule (with the instructions every rank runs) on its own:
/// what an instruction follows is what ran before it on its ranks.
void stageDependencies(const ProgramModel &m, int64_t stage,
                       std::vector<std::vector<int64_t>> &deps) {
  const std::vector<Storage> &blocks = m.blocks;
  std::vector<int64_t> lastWriter(blocks.size(), -1);
  std::vector<std::array<int64_t, 2>> lastTouch(blocks.size(), {-1, -1});
  int64_t lastCompute = -1;
  for (int64_t i = 0; i < int64_t(m.instrs.size()); ++i) {
    const ModelInstr &in = m.instrs[size_t(i)];
    if (stageOf(in) != stage && stageOf(in) != -1)
      continue;
    // Program order is the schedule: communication starts when compute has
    // reached the point where the pass pipeline put it (zero-prefetch moves
    // gathers earlier on purpose), so a gather never runs ahead unbounded.
    if (in.stream == kComm && lastCompute >= 0)
      deps[size_t(i)].push_back(lastCompute);
    if (in.stream == kCompute)
      lastCompute = i;
    for (int s : in.ins)
      if (lastWriter[s] >= 0 &&
          m.instrs[size_t(lastWriter[s])].stream != in.stream)
        deps[size_t(i)].push_back(lastWriter[s]);
    for (int s : in.outs) {
      const Storage &st = blocks[s];
      // Everything that used overlapping memory of the arena before.
      for (size_t o = 0; o < blocks.size(); ++o) {
        const Storage &other = blocks[o];
        if (other.arena != st.arena || (int(o) != s && other.lastUse >= i))
          continue;
        bool overlap = other.offset < st.offset + alignUp(st.bytes) &&
                       st.offset < other.offset + alignUp(other.bytes);
        if (!overlap)
          continue;
        int64_t t = lastTouch[o][1 - in.stream];
        if (t >= 0)
          deps[size_t(i)].push_back(t);
      }
    }
    for (int s : in.ins)
      lastTouch[s][in.stream] = i;
    for (int s : in.outs) {
      lastTouch[s][in.stream] = i;
      lastWriter[s] = i;
    }
  }
}

} // namespace

/// For each instruction, the earlier instructions on the other stream it
/// must follow.
std::vector<std::vector<int64_t>>
crossStreamDependencies(const ProgramModel &m) {
  std::vector<std::vector<int64_t>> deps(m.instrs.size());
  std::set<int64_t> stages;
  for (const ModelInstr &in : m.instrs)
    stages.insert(stageOf(in));
  for (int64_t stage : stages)
    stageDependencies(m, stage, deps);
  return deps;
}

/// The events: eventOf[i] the event instruction i records (-1: none), waits[i]
/// the instructions whose events instruction i waits for.
int64_t computeEvents(ProgramModel &m) {
  std::vector<std::vector<int64_t>> deps = crossStreamDependencies(m);
  const int64_t n = int64_t(m.instrs.size());
  m.eventOf.assign(size_t(n), -1);
  m.waits.assign(size_t(n), {});
  int64_t numEvents = 0;
  // By (stream, stage): the latest event waited for.
  std::map<std::pair<int, int64_t>, int64_t> waitedUpTo;
  for (int64_t i = 0; i < n; ++i) {
    const ModelInstr &in = m.instrs[size_t(i)];
    int64_t latest = -1;
    for (int64_t d : deps[size_t(i)])
      if (stageOf(m.instrs[size_t(d)]) == -1 ||
          stageOf(m.instrs[size_t(d)]) == stageOf(in))
        latest = std::max(latest, d);
    auto key = std::make_pair(in.stream, stageOf(in));
    auto it = waitedUpTo.find(key);
    if (latest < 0 || (it != waitedUpTo.end() && latest <= it->second))
      continue;
    if (m.eventOf[size_t(latest)] < 0)
      m.eventOf[size_t(latest)] = numEvents++;
    m.waits[size_t(i)].push_back(latest);
    waitedUpTo[key] = latest;
  }
  LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": " << numEvents << " events for " << n
                          << " instructions\n");
  return numEvents;
}

} // namespace lowering
} // namespace zero

namespace {

using namespace ::zero::lowering;

struct ZeroInsertEventsPass
    : public ::zero::impl::ZeroInsertEventsPassBase<ZeroInsertEventsPass> {
  using Base::Base;
  ZeroInsertEventsPass() = default;
  /// A clone counts on its own: statistics are not copied.
  ZeroInsertEventsPass(const ZeroInsertEventsPass &other) : Base(other) {}

  void runOnOperation() override {
    FailureOr<ProgramModel> read =
        ProgramModel::read(getOperation(), "zero-insert-events");
    if (failed(read))
      return signalPassFailure();
    ProgramModel &m = *read;
    for (auto [i, in] : llvm::enumerate(m.instrs)) {
      if (!m.waits[i].empty() || m.eventOf[i] >= 0) {
        in.op->emitOpError(
            "zero-insert-events: the program already has events");
        return signalPassFailure();
      }
      for (int s : llvm::concat<int>(in.ins, in.outs))
        if (s < 0 || !m.blockOps[size_t(s)].getOffsetAttr() ||
            !m.blockOps[size_t(s)].getLastUseAttr()) {
          in.op->emitOpError(
              "zero-insert-events: reads or writes a buffer that is not a view "
              "of a planned zrt.block (run zero-plan-memory first)");
          return signalPassFailure();
        }
    }
    numEvents += computeEvents(m);
    insert(m);
  }

  /// A wait before each instruction's new buffers and the instruction (as
  /// the lowering emits them), a record after the instruction.
  void insert(const ProgramModel &m) {
    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    auto streamRef = [&](int s) {
      return FlatSymbolRefAttr::get(ctx, streamName(s));
    };
    for (auto [i, in] : llvm::enumerate(m.instrs)) {
      auto ranks = in.op->getAttrOfType<DenseI64ArrayAttr>("ranks");
      Operation *first = in.op;
      while (first->getPrevNode() &&
             isa<::zero::zrt::BufferOp>(first->getPrevNode()))
        first = first->getPrevNode();
      b.setInsertionPoint(first);
      for (int64_t d : m.waits[i]) {
        ::zero::zrt::WaitOp::create(b, in.op->getLoc(),
                                    b.getI64IntegerAttr(m.eventOf[size_t(d)]),
                                    streamRef(in.stream), ranks);
        ++numWaits;
      }
      if (m.eventOf[i] >= 0) {
        b.setInsertionPointAfter(in.op);
        ::zero::zrt::RecordOp::create(b, in.op->getLoc(),
                                      b.getI64IntegerAttr(m.eventOf[i]),
                                      streamRef(in.stream), ranks);
      }
    }
  }

  Statistic numEvents{this, "events", "Cross-stream events recorded"};
  Statistic numWaits{this, "waits", "Cross-stream waits"};
};

} // namespace
