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

#include <map>

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
    for (auto [k, inp] : llvm::enumerate(in.ins)) {
      int s = k < in.inViews.size() ? in.inViews[k].first
                                    : placement_.lookup(inp.first).storage;
      storages_[s].lastUse = std::max<int64_t>(storages_[s].lastUse, i);
      storages_[s].stages |= stages;
    }
    for (auto [k, out] : llvm::enumerate(in.outs)) {
      int s = k < in.outViews.size() ? in.outViews[k].first
                                     : placement_.lookup(out.first).storage;
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
      if (!in.collective)
        continue;
      auto it = seen.find(in.stream);
      next[size_t(i)] = it == seen.end() ? end : it->second;
      seen[in.stream] = i;
    }
    for (auto [i, in] : llvm::enumerate(instrs_)) {
      if (!in.collective)
        continue;
      for (auto [k, inp] : llvm::enumerate(in.ins)) {
        int s = k < in.inViews.size() ? in.inViews[k].first
                                      : placement_.lookup(inp.first).storage;
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

void RuntimeLowering::planMemory() {
  // Params: whole tensors and shards; a bucket's shards back to back.
  int64_t offset = 0;
  for (auto &[g, s] : globals_) {
    Storage &st = storages_[s];
    if (st.bucket >= 0)
      continue;
    st.offset = offset;
    offset += alignUp(st.bytes);
  }
  // Each bucket's shards in the bucket's order: the collective reads them as
  // one flat buffer.
  for (auto &[id, members] : bucketMembers_) {
    for (int s : members) {
      storages_[s].offset = offset;
      offset += storages_[s].bytes;
    }
    offset = alignUp(offset);
  }
  arenaSize_[0] = noReuse_[0] = lowerBound_[0] = offset;
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
  std::vector<int> placed;
  for (int s : order) {
    Storage &st = storages_[s];
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (int p : placed) {
      const Storage &o = storages_[p];
      if (o.def <= st.lastUse && st.def <= o.lastUse && (o.stages & st.stages))
        busy.push_back({o.offset, o.offset + alignUp(o.bytes)});
    }
    llvm::sort(busy);
    int64_t candidate = 0;
    for (auto [lo, hi] : busy) {
      if (candidate + alignUp(st.bytes) <= lo)
        break;
      candidate = std::max(candidate, hi);
    }
    st.offset = candidate;
    arenaSize_[2] = std::max(arenaSize_[2], candidate + alignUp(st.bytes));
    placed.push_back(s);
  }
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
