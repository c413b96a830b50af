//===- LiveBytes.h - Measured peak of live bytes per arena ------*- C++ -*-===//
//
// The memory plan promises that an arena of Arena.size bytes is enough; this
// measures what a run really kept live, to compare with the plan's lower bound.
// Streams report each instruction's start and end; a buffer becomes live when an
// instruction that writes or reads it starts (constants, inputs and globals are
// live from the start) and dies when the last instruction reading it ends (never
// for outputs and globals). The live size of an arena is the union of the byte
// ranges of its live buffers, so aliasing views are not counted twice.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_EXECUTOR_LIVEBYTES_H
#define ZRT_EXECUTOR_LIVEBYTES_H

#include "zrt/Program.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace zrt {

class LiveBytesTracker {
public:
  /// Prepares for a run of the instructions in `executed` (indices into
  /// program.instructions, the ones this rank runs).
  LiveBytesTracker(const Program &program, const std::vector<size_t> &executed);

  /// Resets to the state at the start of a run.
  void reset();
  void instructionStarted(const Instruction &inst);
  void instructionFinished(const Instruction &inst);
  /// Per arena, the largest live size seen since reset().
  std::vector<uint64_t> peaks() const;

private:
  void makeLive(uint32_t buffer);
  void makeDead(uint32_t buffer);
  void updatePeak(uint32_t arena);

  const Program &program_;
  std::vector<uint32_t> readers_;   // executed instructions reading each buffer
  std::vector<bool> initiallyLive_; // constants, inputs, globals
  std::vector<bool> keepToEnd_;     // outputs, globals
  std::mutex mutex_;
  std::vector<uint32_t> remaining_;
  std::vector<bool> live_;
  /// Per arena: +1 at each live range's start, -1 at its end.
  std::vector<std::map<uint64_t, int>> edges_;
  std::vector<uint64_t> peak_;
};

} // namespace zrt

#endif // ZRT_EXECUTOR_LIVEBYTES_H
