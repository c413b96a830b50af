//===- LiveBytes.cpp - Measured peak of live bytes per arena --------------===//
//
// Updates happen under one mutex at instruction boundaries; the union of live
// ranges is kept per arena in a segment tree over the buffers' offsets
// (RangeCover), so each update takes O(log buffers).
//
//===----------------------------------------------------------------------===//

#include "executor/LiveBytes.h"

#include <algorithm>

namespace zrt {

void RangeCover::init(std::vector<uint64_t> coordinates) {
  std::sort(coordinates.begin(), coordinates.end());
  coordinates.erase(std::unique(coordinates.begin(), coordinates.end()),
                    coordinates.end());
  xs_ = std::move(coordinates);
  clear();
}

void RangeCover::clear() {
  const size_t nodes = xs_.size() >= 2 ? 4 * (xs_.size() - 1) : 0;
  count_.assign(nodes, 0);
  covered_.assign(nodes, 0);
}

void RangeCover::update(size_t node, size_t lo, size_t hi, size_t l, size_t r,
                        int delta) {
  if (r <= lo || hi <= l)
    return;
  if (l <= lo && hi <= r) {
    count_[node] += delta;
  } else {
    const size_t mid = (lo + hi) / 2;
    update(2 * node, lo, mid, l, r, delta);
    update(2 * node + 1, mid, hi, l, r, delta);
  }
  if (count_[node] > 0)
    covered_[node] = xs_[hi] - xs_[lo];
  else
    covered_[node] =
        hi - lo == 1 ? 0 : covered_[2 * node] + covered_[2 * node + 1];
}

void RangeCover::add(uint64_t begin, uint64_t end, int delta) {
  if (begin >= end || xs_.size() < 2)
    return;
  const size_t l =
      size_t(std::lower_bound(xs_.begin(), xs_.end(), begin) - xs_.begin());
  const size_t r =
      size_t(std::lower_bound(xs_.begin(), xs_.end(), end) - xs_.begin());
  update(1, 0, xs_.size() - 1, l, r, delta);
}

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
  // The coordinates of the ranges: every buffer's, at both of its offsets
  // (Program::useInOrderPlan swaps them), and every block's.
  std::vector<std::vector<uint64_t>> coordinates(program.arenas.size());
  for (const BufferDesc &d : program.buffers) {
    if (d.arena >= coordinates.size())
      continue;
    for (int64_t offset : {int64_t(d.offset), d.inOrderOffset})
      if (offset >= 0) {
        coordinates[d.arena].push_back(uint64_t(offset));
        coordinates[d.arena].push_back(uint64_t(offset) + d.bytes());
      }
  }
  cover_.resize(program.arenas.size());
  for (size_t a = 0; a < program.arenas.size(); ++a)
    cover_[a].init(std::move(coordinates[a]));
  std::vector<std::vector<uint64_t>> blockCoordinates(program.arenas.size());
  for (const Block &k : blocks_)
    if (k.arena < blockCoordinates.size()) {
      blockCoordinates[k.arena].push_back(k.begin);
      blockCoordinates[k.arena].push_back(k.end);
    }
  gatheredCover_.resize(program.arenas.size());
  for (size_t a = 0; a < program.arenas.size(); ++a)
    gatheredCover_[a].init(std::move(blockCoordinates[a]));
  reset();
}

void LiveBytesTracker::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  remaining_ = readers_;
  live_.assign(program_.buffers.size(), false);
  for (RangeCover &c : cover_)
    c.clear();
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
  for (RangeCover &c : gatheredCover_)
    c.clear();
  gatheredNow_ = 0;
  gatheredPeak_ = 0;
}

void LiveBytesTracker::gatheredTouched(uint32_t buffer) {
  int k = blockOf_[buffer];
  if (k < 0 || blockLive_[size_t(k)])
    return;
  const Block &block = blocks_[size_t(k)];
  blockLive_[size_t(k)] = true;
  RangeCover &cover = gatheredCover_[block.arena];
  gatheredNow_ -= cover.covered();
  cover.add(block.begin, block.end, +1);
  gatheredNow_ += cover.covered();
  updateGatheredPeak();
}

void LiveBytesTracker::gatheredReleased(uint32_t buffer) {
  int k = blockOf_[buffer];
  if (k < 0 || !blockLive_[size_t(k)] || blockRemaining_[size_t(k)] != 0 ||
      blocks_[size_t(k)].keepToEnd)
    return;
  const Block &block = blocks_[size_t(k)];
  blockLive_[size_t(k)] = false;
  RangeCover &cover = gatheredCover_[block.arena];
  gatheredNow_ -= cover.covered();
  cover.add(block.begin, block.end, -1);
  gatheredNow_ += cover.covered();
}

void LiveBytesTracker::updateGatheredPeak() {
  // The union of each arena's live blocks, summed over the arenas.
  gatheredPeak_ = std::max(gatheredPeak_, gatheredNow_);
}

void LiveBytesTracker::makeLive(uint32_t buffer) {
  const BufferDesc &b = program_.buffers[buffer];
  if (live_[buffer] || b.bytes() == 0)
    return;
  live_[buffer] = true;
  cover_[b.arena].add(b.offset, b.offset + b.bytes(), +1);
}

void LiveBytesTracker::makeDead(uint32_t buffer) {
  const BufferDesc &b = program_.buffers[buffer];
  if (!live_[buffer] || keepToEnd_[buffer])
    return;
  live_[buffer] = false;
  cover_[b.arena].add(b.offset, b.offset + b.bytes(), -1);
}

void LiveBytesTracker::updatePeak(uint32_t arena) {
  const uint64_t total = cover_[arena].covered();
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
