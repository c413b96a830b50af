//===- LiveBytes.cpp - Measured peak of live bytes per arena --------------===//
//
// Updates happen under one mutex at instruction boundaries; the union of live
// ranges is recomputed by a sweep over the arena's range edges, which is linear
// in the number of live buffers and only runs when --report asks for it.
//
//===----------------------------------------------------------------------===//

#include "executor/LiveBytes.h"

#include <algorithm>

namespace zrt {


LiveBytesTracker::LiveBytesTracker(const Program &program,
                                   const std::vector<size_t> &executed)
    : program_(program), readers_(program.buffers.size(), 0),
      initiallyLive_(program.buffers.size(), false),
      keepToEnd_(program.buffers.size(), false),
      blockOf_(program.buffers.size(), -1) {
  for (size_t i : executed)
    for (uint32_t b : program.instructions[i].inputs)
      ++readers_[b];
  for (const ConstantDesc &c : program.constants)
    initiallyLive_[c.buffer] = true;
  for (const BindingDesc &b : program.inputs)
    initiallyLive_[b.buffer] = true;
  for (const GlobalDesc &g : program.globals)
    initiallyLive_[g.buffer] = keepToEnd_[g.buffer] = true;
  for (const BindingDesc &b : program.outputs)
    keepToEnd_[b.buffer] = true;

  // Gathered blocks. A buffer written by an instruction on a communication
  // stream (other than a Recv) starts a block; a buffer nobody writes (a view) joins the block of
  // the most recent write, in program order, to bytes it overlaps at its
  // first use, if that write started one. Bytes shared in program order are
  // the main plan's: under the in-order plan (Program::useInOrderPlan) a
  // prefetched gather may take bytes a view reads later in program order.
  std::vector<uint64_t> mainOffset;
  for (const BufferDesc &d : program.buffers)
    mainOffset.push_back(program.inOrderPlanInUse && d.inOrderOffset >= 0
                             ? uint64_t(d.inOrderOffset)
                             : d.offset);
  std::vector<bool> written(program.buffers.size(), false);
  for (size_t i : executed)
    for (uint32_t b : program.instructions[i].outputs)
      written[b] = true;
  struct Write {
    uint32_t arena;
    uint64_t begin, end;
    int block;
  };
  std::vector<Write> writes; // in program order
  std::vector<bool> assigned(program.buffers.size(), false);
  auto joinView = [&](uint32_t b) {
    if (assigned[b] || written[b] || initiallyLive_[b])
      return;
    assigned[b] = true;
    const BufferDesc &d = program.buffers[b];
    uint64_t begin = mainOffset[b], end = mainOffset[b] + d.bytes();
    for (auto it = writes.rbegin(); it != writes.rend(); ++it)
      if (it->arena == d.arena && it->begin < end && begin < it->end) {
        blockOf_[b] = it->block;
        if (it->block >= 0) {
          Block &k = blocks_[size_t(it->block)];
          k.begin = std::min(k.begin, d.offset);
          k.end = std::max(k.end, d.offset + d.bytes());
        }
        return;
      }
  };
  for (size_t i : executed) {
    const Instruction &inst = program.instructions[i];
    for (uint32_t b : inst.inputs)
      joinView(b);
    // (A pipeline stage's received activations are not gathered parameters.)
    bool comm = program.streams[inst.stream].kind == StreamKind::Comm &&
                inst.kind != OpKind::Recv;
    // A coalesced AllGather's outputs are one block: a bucket's members
    // share one buffer, alive until the last member's last reader. Other
    // outputs (a Quantize's data and scales) are blocks of their own.
    int instBlock = -1;
    for (uint32_t b : inst.outputs) {
      const BufferDesc &d = program.buffers[b];
      if (comm && !assigned[b] && !initiallyLive_[b] && d.bytes() > 0) {
        if (instBlock < 0 || inst.kind != OpKind::AllGather) {
          instBlock = int(blocks_.size());
          blocks_.push_back({d.arena, d.offset, d.offset + d.bytes(), 0, false});
        }
        Block &k = blocks_[size_t(instBlock)];
        k.begin = std::min(k.begin, d.offset);
        k.end = std::max(k.end, d.offset + d.bytes());
        blockOf_[b] = instBlock;
      }
      assigned[b] = true;
      writes.push_back({d.arena, mainOffset[b], mainOffset[b] + d.bytes(), blockOf_[b]});
    }
  }
  for (const BindingDesc &o : program.outputs) {
    joinView(o.buffer);
    if (blockOf_[o.buffer] >= 0)
      blocks_[size_t(blockOf_[o.buffer])].keepToEnd = true;
  }
  for (size_t i : executed)
    for (uint32_t b : program.instructions[i].inputs)
      if (blockOf_[b] >= 0)
        ++blocks_[size_t(blockOf_[b])].readers;
  reset();
}

void LiveBytesTracker::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  remaining_ = readers_;
  live_.assign(program_.buffers.size(), false);
  edges_.assign(program_.arenas.size(), {});
  peak_.assign(program_.arenas.size(), 0);
  current_.assign(program_.arenas.size(), UINT64_MAX);
  timeline_.clear();
  start_ = std::chrono::steady_clock::now();
  for (uint32_t b = 0; b < program_.buffers.size(); ++b)
    if (initiallyLive_[b])
      makeLive(b);
  for (uint32_t a = 0; a < program_.arenas.size(); ++a)
    updatePeak(a);
  blockRemaining_.assign(blocks_.size(), 0);
  for (size_t k = 0; k < blocks_.size(); ++k)
    blockRemaining_[k] = blocks_[k].readers;
  blockLive_.assign(blocks_.size(), false);
  gatheredEdges_.clear();
  gatheredPeak_ = 0;
}

void LiveBytesTracker::gatheredTouched(uint32_t buffer) {
  int k = blockOf_[buffer];
  if (k < 0 || blockLive_[size_t(k)])
    return;
  const Block &block = blocks_[size_t(k)];
  blockLive_[size_t(k)] = true;
  ++gatheredEdges_[{block.arena, block.begin}];
  --gatheredEdges_[{block.arena, block.end}];
  updateGatheredPeak();
}

void LiveBytesTracker::gatheredReleased(uint32_t buffer) {
  int k = blockOf_[buffer];
  if (k < 0 || !blockLive_[size_t(k)] || blockRemaining_[size_t(k)] != 0 ||
      blocks_[size_t(k)].keepToEnd)
    return;
  const Block &block = blocks_[size_t(k)];
  blockLive_[size_t(k)] = false;
  for (auto [at, delta] : {std::make_pair(block.begin, -1),
                           std::make_pair(block.end, +1)}) {
    auto it = gatheredEdges_.try_emplace({block.arena, at}, 0).first;
    if ((it->second += delta) == 0)
      gatheredEdges_.erase(it);
  }
}

void LiveBytesTracker::updateGatheredPeak() {
  // Ranges of different arenas never overlap in the sweep: the depth is back
  // to 0 at the end of each arena's last range.
  uint64_t total = 0, openedAt = 0;
  int depth = 0;
  for (auto [key, delta] : gatheredEdges_) {
    if (depth == 0 && depth + delta > 0)
      openedAt = key.second;
    depth += delta;
    if (depth == 0)
      total += key.second - openedAt;
  }
  gatheredPeak_ = std::max(gatheredPeak_, total);
}

void LiveBytesTracker::makeLive(uint32_t buffer) {
  const BufferDesc &b = program_.buffers[buffer];
  if (live_[buffer] || b.bytes() == 0)
    return;
  live_[buffer] = true;
  std::map<uint64_t, int> &edges = edges_[b.arena];
  ++edges[b.offset];
  --edges[b.offset + b.bytes()];
}

void LiveBytesTracker::makeDead(uint32_t buffer) {
  const BufferDesc &b = program_.buffers[buffer];
  if (!live_[buffer] || keepToEnd_[buffer])
    return;
  live_[buffer] = false;
  std::map<uint64_t, int> &edges = edges_[b.arena];
  for (auto [at, delta] : {std::make_pair(b.offset, -1),
                           std::make_pair(b.offset + b.bytes(), +1)}) {
    // An edge may have been erased when another range's edge at the same
    // offset cancelled it; operator[] brings it back at 0.
    auto it = edges.try_emplace(at, 0).first;
    if ((it->second += delta) == 0)
      edges.erase(it);
  }
}

void LiveBytesTracker::updatePeak(uint32_t arena) {
  uint64_t total = 0, openedAt = 0;
  int depth = 0;
  for (auto [at, delta] : edges_[arena]) {
    if (depth == 0 && depth + delta > 0)
      openedAt = at;
    depth += delta;
    if (depth == 0)
      total += at - openedAt;
  }
  peak_[arena] = std::max(peak_[arena], total);
  if (total != current_[arena]) {
    current_[arena] = total;
    const double us =
        simulatedUs_ >= 0
            ? simulatedUs_
            : std::max(0.0, std::chrono::duration<double, std::micro>(
                                std::chrono::steady_clock::now() - start_)
                                .count());
    timeline_.push_back({us, arena, total});
  }
}

void LiveBytesTracker::instructionStarted(const Instruction &inst) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::vector<uint32_t> *list : {&inst.inputs, &inst.outputs})
    for (uint32_t b : *list) {
      makeLive(b);
      updatePeak(program_.buffers[b].arena);
      gatheredTouched(b);
    }
}

void LiveBytesTracker::instructionFinished(const Instruction &inst) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (uint32_t b : inst.inputs) {
    --remaining_[b];
    if (blockOf_[b] >= 0)
      --blockRemaining_[size_t(blockOf_[b])];
  }
  for (const std::vector<uint32_t> *list : {&inst.inputs, &inst.outputs})
    for (uint32_t b : *list) {
      if (remaining_[b] == 0)
        makeDead(b);
      gatheredReleased(b);
    }
}

std::vector<uint64_t> LiveBytesTracker::peaks() const {
  return peak_;
}

uint64_t LiveBytesTracker::peakGatheredBytes() const { return gatheredPeak_; }

std::vector<size_t> executedInstructions(const Program &program, int rank) {
  std::vector<bool> member(program.groups.size(), false);
  for (size_t g = 0; g < program.groups.size(); ++g)
    for (int r : program.groups[g].ranks)
      member[g] = member[g] || r == rank;
  std::vector<size_t> executed;
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    const Instruction &inst = program.instructions[i];
    if (!inst.runsOn(rank))
      continue;
    if (isCollective(inst.kind) && inst.group >= 0 &&
        size_t(inst.group) < member.size() && !member[size_t(inst.group)])
      continue;
    executed.push_back(i);
  }
  return executed;
}

uint64_t plannedPeakGatheredBytes(const Program &program,
                                  const std::vector<size_t> &executed) {
  LiveBytesTracker tracker(program, executed);
  for (size_t i : executed) {
    tracker.instructionStarted(program.instructions[i]);
    tracker.instructionFinished(program.instructions[i]);
  }
  return tracker.peakGatheredBytes();
}


} // namespace zrt
