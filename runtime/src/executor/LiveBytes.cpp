//===- LiveBytes.cpp - Measured peak of live bytes per arena --------------===//
//
// Updates happen under one mutex at instruction boundaries; the union of live
// ranges is recomputed by a sweep over the arena's range edges, which is linear
// in the number of live buffers and only runs when --report asks for it.
//
//===----------------------------------------------------------------------===//

#include "executor/LiveBytes.h"

namespace zrt {

LiveBytesTracker::LiveBytesTracker(const Program &program,
                                   const std::vector<size_t> &executed)
    : program_(program), readers_(program.buffers.size(), 0),
      initiallyLive_(program.buffers.size(), false),
      keepToEnd_(program.buffers.size(), false) {
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
  reset();
}

void LiveBytesTracker::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  remaining_ = readers_;
  live_.assign(program_.buffers.size(), false);
  edges_.assign(program_.arenas.size(), {});
  peak_.assign(program_.arenas.size(), 0);
  for (uint32_t b = 0; b < program_.buffers.size(); ++b)
    if (initiallyLive_[b])
      makeLive(b);
  for (uint32_t a = 0; a < program_.arenas.size(); ++a)
    updatePeak(a);
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
    auto it = edges.find(at);
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
}

void LiveBytesTracker::instructionStarted(const Instruction &inst) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::vector<uint32_t> *list : {&inst.inputs, &inst.outputs})
    for (uint32_t b : *list) {
      makeLive(b);
      updatePeak(program_.buffers[b].arena);
    }
}

void LiveBytesTracker::instructionFinished(const Instruction &inst) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (uint32_t b : inst.inputs)
    --remaining_[b];
  for (const std::vector<uint32_t> *list : {&inst.inputs, &inst.outputs})
    for (uint32_t b : *list)
      if (remaining_[b] == 0)
        makeDead(b);
}

std::vector<uint64_t> LiveBytesTracker::peaks() const {
  return peak_;
}

} // namespace zrt
