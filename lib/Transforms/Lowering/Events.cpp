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

#include "llvm/Support/Debug.h"

#include <array>
#include <map>
#include <set>

#define DEBUG_TYPE "zero-lower-to-runtime"

using namespace mlir;
using namespace zero::lowering;

namespace {

/// The stage an instruction runs on (-1: every rank). Pipeline stages run on
/// their own ranks: an instruction follows only instructions that run
/// wherever it runs (every rank, or its stage), and its wait and the event it
/// waits for run on its ranks only, so no rank ever waits for a point of
/// another stage's schedule.
int64_t stageOf(const Instr &in) { return in.ranks.empty() ? -1 : in.ranks.front(); }

} // namespace

std::vector<std::vector<int64_t>> RuntimeLowering::crossStreamDependencies() const {
  int64_t n = instrs_.size();
  std::vector<std::vector<int64_t>> deps(n);
  std::vector<int64_t> lastWriter(storages_.size(), -1);
  std::vector<std::array<int64_t, 2>> lastTouch(storages_.size(), {-1, -1});
  // Each stage's schedule (with the instructions every rank runs) on its own:
  // what an instruction follows is what ran before it on its ranks.
  std::set<int64_t> stages;
  for (const Instr &in : instrs_)
    stages.insert(stageOf(in));
  for (int64_t stage : stages) {
    std::fill(lastWriter.begin(), lastWriter.end(), -1);
    std::fill(lastTouch.begin(), lastTouch.end(), std::array<int64_t, 2>{-1, -1});
    int64_t lastCompute = -1;
    for (int64_t i = 0; i < n; ++i) {
      const Instr &in = instrs_[i];
      if (stageOf(in) != stage && stageOf(in) != -1)
        continue;
      // Program order is the schedule: communication starts when compute has
      // reached the point where the pass pipeline put it (zero-prefetch moves
      // gathers earlier on purpose), so a gather never runs ahead unbounded.
      if (in.stream == kComm && lastCompute >= 0)
        deps[i].push_back(lastCompute);
      if (in.stream == kCompute)
        lastCompute = i;
      for (size_t k = 0; k < in.ins.size(); ++k) {
        int s = inputStorage(in, k);
        if (lastWriter[s] >= 0 && instrs_[lastWriter[s]].stream != in.stream)
          deps[i].push_back(lastWriter[s]);
      }
      for (size_t k = 0; k < in.outs.size(); ++k) {
        int s = outputStorage(in, k);
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
        lastTouch[inputStorage(in, k)][in.stream] = i;
      for (size_t k = 0; k < in.outs.size(); ++k) {
        int s = outputStorage(in, k);
        lastTouch[s][in.stream] = i;
        lastWriter[s] = i;
      }
    }
  }
  return deps;
}

void RuntimeLowering::computeEvents() {
  std::vector<std::vector<int64_t>> deps = crossStreamDependencies();
  // One event per producing instruction; a stream waits for an event only if
  // it has not already waited for a later one from the same stream.
  int64_t n = instrs_.size();
  eventOf_.assign(size_t(n), -1);
  int64_t numEvents = 0;
  waits_.assign(size_t(n), {});
  // By (stream, stage): the latest event waited for.
  std::map<std::pair<int, int64_t>, int64_t> waitedUpTo;
  for (int64_t i = 0; i < n; ++i) {
    const Instr &in = instrs_[i];
    int64_t latest = -1;
    for (int64_t d : deps[i])
      if (stageOf(instrs_[d]) == -1 || stageOf(instrs_[d]) == stageOf(in))
        latest = std::max(latest, d);
    auto key = std::make_pair(in.stream, stageOf(in));
    auto it = waitedUpTo.find(key);
    if (latest < 0 || (it != waitedUpTo.end() && latest <= it->second))
      continue;
    if (eventOf_[latest] < 0)
      eventOf_[latest] = numEvents++;
    waits_[i].push_back(latest);
    waitedUpTo[key] = latest;
  }
  LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": " << numEvents << " events for " << n
                          << " instructions\n");
}
