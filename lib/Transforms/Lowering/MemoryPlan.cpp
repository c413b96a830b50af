//===- MemoryPlan.cpp - zero-lower-to-runtime: memory placement -------------===//
//
// Live intervals of every storage block (a gathered parameter dies at its
// zero.release) and arena offsets: params and constants packed once,
// activations greedily by size over their live intervals, so dead blocks'
// space is reused. Also the no-reuse total and the live-bytes lower bound.
//
//===----------------------------------------------------------------------===//

#include "RuntimeLowering.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Debug.h"

#include <map>

#define DEBUG_TYPE "zero-lower-to-runtime"

using namespace mlir;
using namespace zero::lowering;

LogicalResult RuntimeLowering::computeLiveness() {
  int64_t end = instrs_.size();
  constexpr uint64_t kAllStages = ~uint64_t(0);
  auto stagesOf = [](const Instr &in) {
    uint64_t mask = 0;
    for (int64_t r : in.ranks)
      mask |= r >= 0 && r < 64 ? uint64_t(1) << r : kAllStages;
    return in.ranks.empty() ? kAllStages : mask;
  };
  // Uses by views/releases are covered: a view shares its operand's storage and
  // any instruction reading the view reads the storage.
  for (auto [i, in] : llvm::enumerate(instrs_)) {
    const uint64_t stages = stagesOf(in);
    for (size_t k = 0; k < in.ins.size(); ++k) {
      int s = inputStorage(in, k);
      storages_[s].lastUse = std::max<int64_t>(storages_[s].lastUse, i);
      storages_[s].stages |= stages;
    }
    for (size_t k = 0; k < in.outs.size(); ++k) {
      int s = outputStorage(in, k);
      storages_[s].def = std::min<int64_t>(storages_[s].def, i);
      storages_[s].lastUse = std::max<int64_t>(storages_[s].lastUse, i);
      storages_[s].stages |= stages;
    }
  }
  // Inputs are bound and outputs read on every rank that has them: kept
  // apart from every stage's blocks.
  for (auto &[name, v] : outputs_)
    storages_[placement_.lookup(v).storage].stages = kAllStages;
  for (auto &[name, v] : inputs_)
    storages_[placement_.lookup(v).storage].stages = kAllStages;
  for (Storage &st : storages_)
    if (!st.stages)
      st.stages = kAllStages;
  // A collective reads its input on the communication stream while the
  // compute stream goes on: were its memory reused at once, the next compute
  // kernel writing there would have to wait for the collective (a
  // write-after-read hazard), and backward would stop at every gradient's
  // reduce-scatter. Its input stays allocated until the next collective of
  // its stream is issued (by then it has most likely finished), so at most
  // one more collective's input is held.
  {
    std::vector<int64_t> next(instrs_.size(), end);
    llvm::DenseMap<int, int64_t> seen;
    for (int64_t i = end - 1; i >= 0; --i) {
      const Instr &in = instrs_[size_t(i)];
      if (!in.isCollective)
        continue;
      auto it = seen.find(in.stream);
      next[size_t(i)] = it == seen.end() ? end : it->second;
      seen[in.stream] = i;
    }
    for (auto [i, in] : llvm::enumerate(instrs_)) {
      if (!in.isCollective)
        continue;
      for (size_t k = 0; k < in.ins.size(); ++k) {
        int s = inputStorage(in, k);
        if (s >= 0 && storages_[s].lastUse == int64_t(i))
          storages_[s].lastUse = next[i];
      }
    }
  }
  for (auto &[name, v] : outputs_)
    storages_[placement_.lookup(v).storage].lastUse = end;
  for (auto &[name, v] : inputs_)
    storages_[placement_.lookup(v).storage].def = -1;
  // A gathered parameter lives until its zero.release, the single source of
  // truth; one never released is kept to the end of the program.
  for (Storage &st : storages_) {
    if (!st.gathered)
      continue;
    if (!st.release) {
      st.lastUse = end;
      continue;
    }
    if (st.lastUse > st.released)
      return st.release
                 ->emitOpError("releases a gathered parameter that is still "
                               "used after it; move the release after its "
                               "last use")
                 .attachNote(instrs_[size_t(st.lastUse)].loc)
             << "used here";
    st.lastUse = std::max(st.lastUse, st.released);
  }
  return success();
}

/// Offsets for the blocks in `order` (the largest first), each at the lowest
/// offset free over its interval [def[s], last[s]] among the blocks placed
/// before it on a stage it shares; `size` grows to the end of the highest.
std::vector<int64_t> RuntimeLowering::placeBlocks(const std::vector<int> &order,
                                                  const std::vector<int64_t> &def,
                                                  const std::vector<int64_t> &last,
                                                  int64_t *size) const {
  std::vector<int64_t> offset(storages_.size(), -1);
  std::vector<int> placed;
  for (int s : order) {
    const Storage &st = storages_[s];
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (int p : placed)
      if (def[p] <= last[s] && def[s] <= last[p] && (storages_[p].stages & st.stages))
        busy.push_back({offset[p], offset[p] + alignUp(storages_[p].bytes)});
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

void RuntimeLowering::planMemory() {
  // Params: whole tensors and shards; a bucket's shards back to back. The
  // offloaded ones the same way, in the offload arena (the swap file),
  // page-aligned so that swapping one never touches another's pages.
  // The host arena's (offload device cpu) as the params arena's.
  int64_t offset = 0, offloaded = 0, host = 0;
  for (auto &[g, s] : globals_) {
    Storage &st = storages_[s];
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
  arenaSize_[0] = noReuse_[0] = lowerBound_[0] = offset;
  const int hostArena = int(ArenaKind::Host);
  arenaSize_[hostArena] = noReuse_[hostArena] = lowerBound_[hostArena] = host;
  // The offload arena's lower bound: the most of it the swaps keep resident
  // at once (the plan's resident bytes; the rest stays in the swap file).
  const int off = int(ArenaKind::Offload);
  arenaSize_[off] = noReuse_[off] = offloaded;
  lowerBound_[off] = std::min(offloaded, residentPeak_);
  // Constants: never freed.
  offset = 0;
  for (auto &[c, s] : constants_) {
    storages_[s].offset = offset;
    offset += alignUp(storages_[s].bytes);
  }
  arenaSize_[1] = noReuse_[1] = lowerBound_[1] = offset;

  // Activations: greedy by size over live intervals.
  std::vector<int> order;
  for (size_t s = 0; s < storages_.size(); ++s)
    if (storages_[s].arena == ArenaKind::Activations) {
      if (storages_[s].def == INT64_MAX)
        storages_[s].def = storages_[s].lastUse; // written by nobody
      order.push_back(s);
      noReuse_[2] += alignUp(storages_[s].bytes);
    }
  llvm::stable_sort(order, [&](int a, int b) {
    return storages_[a].bytes > storages_[b].bytes;
  });
  std::vector<int64_t> def, last;
  for (const Storage &st : storages_) {
    def.push_back(st.def);
    last.push_back(st.lastUse);
  }
  std::vector<int64_t> offsets = placeBlocks(order, def, last, &arenaSize_[2]);
  for (int s : order)
    storages_[s].offset = offsets[s];
  // Lower bound: the most bytes simultaneously live at any instruction, on
  // any one stage (a program without stages has one: every bit set). A sweep
  // over the blocks' starts and ends, per stage.
  uint64_t stageBits = 0;
  for (int s : order)
    if (storages_[s].stages != ~uint64_t(0))
      stageBits |= storages_[s].stages;
  for (int stage = -1; stage < 64; ++stage) {
    const uint64_t bit = stage < 0 ? ~uint64_t(0) : uint64_t(1) << stage;
    if (stage < 0 ? stageBits != 0 : !(stageBits & bit))
      continue; // staged: each stage on its own; else one pass
    std::map<int64_t, int64_t> delta;
    for (int s : order)
      if (storages_[s].stages & bit) {
        delta[storages_[s].def] += alignUp(storages_[s].bytes);
        delta[storages_[s].lastUse + 1] -= alignUp(storages_[s].bytes);
      }
    int64_t live = 0;
    for (auto [at, d] : delta) {
      live += d;
      lowerBound_[2] = std::max(lowerBound_[2], live);
    }
  }
}

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
void RuntimeLowering::planInOrder() {
  const int64_t n = int64_t(instrs_.size());
  for (const Instr &in : instrs_)
    if (!in.ranks.empty() || (in.stream == kCompute && in.name == "Recv"))
      return;
  std::vector<int64_t> start(size_t(n), n);
  std::vector<int64_t> commSteps;
  for (int64_t i = 0; i < n; ++i)
    if (instrs_[size_t(i)].stream == kComm)
      commSteps.push_back(i);
  if (commSteps.empty())
    return;
  size_t next = 0;
  int64_t allowed = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (instrs_[size_t(i)].stream != kCompute)
      continue;
    for (int64_t j : waits_[size_t(i)])
      if (instrs_[size_t(j)].stream == kComm)
        allowed = std::max(allowed, j);
    for (; next < commSteps.size() && commSteps[next] <= allowed; ++next)
      start[size_t(commSteps[next])] = i;
  }
  // Each block's interval in turn-taking order.
  std::vector<int64_t> def, last;
  for (const Storage &st : storages_) {
    def.push_back(st.def);
    last.push_back(st.lastUse);
  }
  std::vector<bool> commWritten(storages_.size(), false);
  for (int64_t h : commSteps) {
    const Instr &in = instrs_[size_t(h)];
    auto touch = [&](int s, bool write) {
      if (s < 0)
        return;
      last[s] = std::max(last[s], start[size_t(h)]);
      if (write && storages_[s].def == h)
        commWritten[s] = true;
    };
    for (size_t k = 0; k < in.ins.size(); ++k)
      touch(inputStorage(in, k), false);
    for (size_t k = 0; k < in.outs.size(); ++k)
      touch(outputStorage(in, k), true);
  }
  std::vector<int> order;
  for (auto [s, st] : llvm::enumerate(storages_)) {
    if (st.arena != ArenaKind::Activations)
      continue;
    if (commWritten[s])
      def[s] = start[size_t(st.def)];
    order.push_back(int(s));
  }
  llvm::stable_sort(order, [&](int a, int b) {
    return storages_[a].bytes > storages_[b].bytes;
  });
  int64_t size = 0;
  std::vector<int64_t> offsets = placeBlocks(order, def, last, &size);
  bool differs = false;
  for (int s : order)
    differs |= offsets[s] != storages_[s].offset;
  LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": in-order plan "
                          << (differs ? "differs" : "is the main plan") << ": " << size
                          << " activation bytes\n");
  if (!differs)
    return;
  for (int s : order)
    storages_[s].inOrderOffset = offsets[s];
  inOrderSize_ = size;
}
