//===- Events.cpp - zero-lower-to-runtime: cross-stream events --------------===//
//
// For each instruction, the earlier instructions on the other stream it must
// follow: read-after-write on its inputs, write-after-read and write-after-
// write on memory its outputs reuse, and the program-order fence that keeps a
// gather where the pass pipeline put it. One event per producing instruction;
// a stream waits only for the latest event it has not yet waited for.
//
//===----------------------------------------------------------------------===//

#include "RuntimeLowering.h"

#include <array>
#include <map>
#include <set>

using namespace mlir;
using namespace zero::lowering;

void RuntimeLowering::computeEvents() {
  // Events: for each instruction, the earlier instructions on other streams it
  // must follow (RAW on its inputs; WAR/WAW on memory its outputs reuse).
  int64_t n = instrs_.size();
  std::vector<std::vector<int64_t>> deps(n);
  std::vector<int64_t> lastWriter(storages_.size(), -1);
  std::vector<std::array<int64_t, 2>> lastTouch(storages_.size(), {-1, -1});
  auto storageOf = [&](const Instr &in, size_t k, bool out) {
    const auto &views = out ? in.outViews : in.inViews;
    if (k < views.size())
      return views[k].first;
    return placement_.lookup(out ? in.outs[k].first : in.ins[k].first).storage;
  };
  // Pipeline stages run on their own ranks: an instruction follows only
  // instructions that run wherever it runs (every rank, or its stage), and
  // its wait and the event it waits for run on its ranks only, so no rank
  // ever waits for a point of another stage's schedule.
  auto stageOf = [&](int64_t i) -> int64_t {
    return instrs_[i].ranks.empty() ? -1 : instrs_[i].ranks.front();
  };
  auto runsWherever = [&](int64_t j, int64_t i) {
    return stageOf(j) == -1 || stageOf(j) == stageOf(i);
  };
  // Each stage's schedule (with the instructions every rank runs) on its own:
  // what an instruction follows is what ran before it on its ranks.
  std::set<int64_t> stages;
  for (int64_t i = 0; i < n; ++i)
    stages.insert(stageOf(i));
  for (int64_t stage : stages) {
    std::fill(lastWriter.begin(), lastWriter.end(), -1);
    std::fill(lastTouch.begin(), lastTouch.end(), std::array<int64_t, 2>{-1, -1});
    int64_t lastCompute = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (stageOf(i) != stage && stageOf(i) != -1)
        continue;
      const Instr &in = instrs_[i];
      // Program order is the schedule: communication starts when compute has
      // reached the point where the pass pipeline put it (zero-prefetch moves
      // gathers earlier on purpose), so a gather never runs ahead unbounded.
      if (in.stream == kComm && lastCompute >= 0)
        deps[i].push_back(lastCompute);
      if (in.stream == kCompute)
        lastCompute = i;
      for (size_t k = 0; k < in.ins.size(); ++k) {
        int s = storageOf(in, k, false);
        if (lastWriter[s] >= 0 && instrs_[lastWriter[s]].stream != in.stream)
          deps[i].push_back(lastWriter[s]);
      }
      for (size_t k = 0; k < in.outs.size(); ++k) {
        int s = storageOf(in, k, true);
        const Storage &st = storages_[s];
        // Everything that used overlapping activation memory before.
        for (size_t o = 0; o < storages_.size(); ++o) {
          const Storage &other = storages_[o];
          if (other.arena != st.arena || (int(o) != s && other.lastUse >= i))
            continue;
          bool overlap = other.offset < st.offset + alignUp(st.bytes) &&
                         st.offset < other.offset + alignUp(other.bytes);
          if (!overlap)
            continue;
          int64_t t = lastTouch[o][1 - in.stream];
          if (t >= 0)
            deps[i].push_back(t);
        }
      }
      for (size_t k = 0; k < in.ins.size(); ++k)
        lastTouch[storageOf(in, k, false)][in.stream] = i;
      for (size_t k = 0; k < in.outs.size(); ++k) {
        int s = storageOf(in, k, true);
        lastTouch[s][in.stream] = i;
        lastWriter[s] = i;
      }
    }
  }
  // One event per producing instruction; a stream waits for an event only if
  // it has not already waited for a later one from the same stream.
  eventOf_.assign(size_t(n), -1);
  int64_t numEvents = 0;
  waits_.assign(size_t(n), {});
  // By (stream, stage): the latest event waited for.
  std::map<std::pair<int, int64_t>, int64_t> waitedUpTo;
  for (int64_t i = 0; i < n; ++i) {
    int s = instrs_[i].stream;
    int64_t latest = -1;
    for (int64_t d : deps[i])
      if (runsWherever(d, i))
        latest = std::max(latest, d);
    auto key = std::make_pair(s, stageOf(i));
    auto it = waitedUpTo.find(key);
    if (latest < 0 || (it != waitedUpTo.end() && latest <= it->second))
      continue;
    if (eventOf_[latest] < 0)
      eventOf_[latest] = numEvents++;
    waits_[i].push_back(latest);
    waitedUpTo[key] = latest;
  }
}
